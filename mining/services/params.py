"""A run's parameters, defined once: one frozen dataclass per run kind, its fields typed with the core's enums and
their defaults, bounds and help in the field definitions.

`from_dict()` is the one validation: it fills defaults (also for rows written before a field existed), parses each
value and raises `ParamsError` with one message per field. The run form, the API serializer and the management
commands derive their fields from the dataclass (`param_specs`) and validate by calling `from_dict()`, so a bad value
gets the same message everywhere; handlers read `from_dict(run.params)`, never the raw dict.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from ..core.enums import DocMethod, KnnMethod, Margin, SiteScope, Strategy, VoteForm


class ParamsError(ValueError):
    """Bad run parameters: `errors` maps each bad field to its one message."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = dict(errors)
        super().__init__("; ".join(f"{name}: {msg}" for name, msg in self.errors.items()))


def param(default: Any, help: str, *, lo: float | None = None, hi: float | None = None, label: str = "") -> Any:
    """A dataclass field with its help text, label and inclusive bounds (for numbers)."""
    return field(default=default, metadata={"help": help, "lo": lo, "hi": hi, "label": label})


@dataclass(frozen=True)
class ParamSpec:
    """What a form, serializer or argparse option needs to know of one parameter."""

    name: str
    kind: type  # int, float, bool, str or an Enum class
    default: Any
    optional: bool  # None is a valid value ("not set")
    help: str
    label: str
    lo: float | None
    hi: float | None

    @property
    def choices(self) -> list[tuple[str, str]]:
        """(value, label) pairs of an enum parameter; empty otherwise."""
        if isinstance(self.kind, type) and issubclass(self.kind, enum.Enum):
            return [(m.value, m.value.replace("_", " ")) for m in self.kind]
        return []

    @property
    def initial(self) -> Any:
        """The default as a form or option shows it (an enum's value)."""
        return self.default.value if isinstance(self.default, enum.Enum) else self.default

    def describe(self) -> str:
        """The help text with the choices or bounds, for forms, the API schema and --help."""
        extra = ""
        if self.choices:
            extra = f" One of: {', '.join(v for v, _ in self.choices)}."
        elif self.lo is not None or self.hi is not None:
            extra = f" From {_num(self.lo)} to {_num(self.hi)}." if self.hi is not None else f" At least {self.lo}."
        return f"{self.help}{extra}"


def _num(x: float | None) -> str:
    return "any" if x is None else f"{x:g}"


def _unwrap(tp: Any) -> tuple[type, bool]:
    """(base type, optional) of an annotation such as `int`, `float | None`, `Margin`."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _parse(spec: ParamSpec, raw: Any) -> Any:
    """One value parsed and checked; raises ValueError with the field's message."""
    kind = spec.kind
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if isinstance(raw, kind):
            return raw
        try:
            return kind(str(raw).strip().lower())
        except ValueError:
            raise ValueError(f"'{raw}' is not one of: {', '.join(m.value for m in kind)}") from None
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"'{raw}' is not true or false")
    if kind in (int, float):
        try:
            value = kind(raw)
            if kind is int and isinstance(raw, float) and raw != int(raw):
                raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"'{raw}' is not {'a whole number' if kind is int else 'a number'}") from None
        if kind is float and value != value:  # NaN
            raise ValueError("must be a number, not NaN")
        if spec.lo is not None and value < spec.lo:
            raise ValueError(f"must be at least {_num(spec.lo)} (got {raw})")
        if spec.hi is not None and value > spec.hi:
            raise ValueError(f"must be at most {_num(spec.hi)} (got {raw})")
        return value
    return str(raw)


class RunParams:
    """Mixin of the per-kind parameter dataclasses: specs, parsing, and the JSON form stored in MiningRun.params."""

    KIND: ClassVar[str] = ""

    @classmethod
    def specs(cls) -> list[ParamSpec]:
        """One ParamSpec per field, in definition order."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            kind, optional = _unwrap(hints[f.name])
            meta = f.metadata
            out.append(
                ParamSpec(
                    name=f.name,
                    kind=kind,
                    default=f.default,
                    optional=optional,
                    help=meta.get("help", ""),
                    label=meta.get("label", "") or f.name.replace("_", " ").capitalize(),
                    lo=meta.get("lo"),
                    hi=meta.get("hi"),
                )
            )
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Self:
        """Parse and check every field (defaults for missing ones); ParamsError names each bad field once.

        Keys that are not fields are refused too, so a typo is never silently ignored.
        """
        data = dict(data or {})
        errors: dict[str, str] = {}
        values: dict[str, Any] = {}
        specs = cls.specs()
        names = {s.name for s in specs}
        for spec in specs:
            raw = data.get(spec.name)
            if raw is None or (raw == "" and spec.kind is not str):
                # not given (or blank in a form): the default; an optional field given blank is "not set"
                values[spec.name] = None if (spec.optional and spec.name in data) else spec.default
                continue
            try:
                values[spec.name] = _parse(spec, raw)
            except ValueError as exc:
                errors[spec.name] = str(exc)
        for extra in sorted(set(data) - names):
            errors[extra] = f"is not a parameter of {cls.KIND or cls.__name__} runs"
        if errors:
            raise ParamsError(errors)
        obj = cls(**values)  # type: ignore[call-arg]
        obj.check()
        return obj

    def check(self) -> None:
        """Rules that involve several fields (override); raise ParamsError."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored in MiningRun.params (enums as their values)."""
        return {
            k: (v.value if isinstance(v, enum.Enum) else v)
            for k, v in dataclasses.asdict(self).items()  # type: ignore[call-overload]
        }


@dataclass(frozen=True)
class SentenceRunParams(RunParams):
    """How a sentence-mining run embeds, searches, scores, selects and filters."""

    KIND: ClassVar[str] = "sentence"

    knn: KnnMethod = param(KnnMethod.EXACT, "Exact (flat) or approximate (IVF) nearest-neighbour search.", label="kNN")
    margin: Margin = param(Margin.RATIO, "How a pair's cosine is scored against its neighbourhoods.")
    k: int = param(4, "Neighbours per sentence for the margin and the candidates.", lo=1, hi=64)
    strategy: Strategy = param(Strategy.MAX_SCORE, "How candidates are selected from both directions.")
    threshold: float | None = param(None, "Keep pairs scoring at least this (blank: keep all).")
    filters: bool = param(True, "Apply the pre-filters (language, length ratio, numbers, copies).", label="Pre-filters")
    nprobe: int = param(16, "Inverted lists an IVF search visits per query.", lo=1, hi=4096, label="IVF nprobe")
    site: str = param(
        "",
        "Mine only the sentences of this site's pages (a registered domain of a crawled corpus; blank: all).",
        label="Site",
    )


def same_as(params: type[RunParams], name: str) -> Any:
    """A field with the default, bounds and help of `params`' field `name`: a parameter two run kinds share is
    still defined once."""
    source = params.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return field(default=source.default, metadata=dict(source.metadata))


@dataclass(frozen=True)
class SelfTrainParams(RunParams):
    """How a self-training run mines its own corpus and trains an adapter on the pairs it is sure of."""

    KIND: ClassVar[str] = "self_train"

    base: str = param("usem3", "Registry name of the pretrained encoder that is adapted.")
    rounds: int = param(3, "At most this many rounds of mining and training.", lo=1, hi=20)
    k: int = same_as(SentenceRunParams, "k")
    margin: Margin = same_as(SentenceRunParams, "margin")
    min_precision: float = param(
        0.95, "Expected precision the pairs trained on must reach.", lo=0.5, hi=1.0, label="Minimum precision"
    )
    filters: bool = same_as(SentenceRunParams, "filters")
    seed: int = param(0, "Seeds the adapter's weights, splits and batches.", lo=0, hi=2**31 - 1)
    epochs: int | None = param(None, "Adapter epochs per round (blank: the adapter's default).", lo=1, hi=100)
    lr: float | None = param(None, "Adapter learning rate (blank: the adapter's default).", lo=1e-6, hi=1.0)
    batch_size: int | None = param(None, "Adapter batch size (blank: the adapter's default).", lo=2, hi=65536)
    hard_negatives: int | None = param(
        None, "Adapter hard negatives per source, 0 for none (blank: the adapter's default).", lo=0, hi=64
    )
    margin_loss: float | None = param(
        None, "The adapter loss's additive margin (blank: the adapter's default).", lo=0.0, hi=2.0
    )
    min_gain: float = param(
        0.005,
        "Relative growth of the mutual-best pairs a round (and the subword DAN) must bring to be kept and go on.",
        lo=-1.0,
        hi=1.0,
        label="Minimum gain",
    )
    dan: bool = param(
        True,
        "Also train a subword DAN (character 3-5-grams) on the best round's confident pairs and register the adapter "
        "combined with it when the combination grows the mutual-best pairs by the minimum gain (a few minutes more).",
        label="Subword DAN",
    )
    dan_weight: float = param(
        0.3, "The subword DAN's share of the combined encoder's cosine.", lo=0.05, hi=0.95, label="DAN weight"
    )

    def adapter_overrides(self) -> dict[str, Any]:
        """The AdapterConfig fields these parameters set (the loss's margin is AdapterConfig.margin)."""
        names = {"epochs": "epochs", "lr": "lr", "batch_size": "batch_size", "hard_negatives": "hard_negatives"}
        out = {field_name: getattr(self, name) for name, field_name in names.items() if getattr(self, name) is not None}
        if self.margin_loss is not None:
            out["margin"] = self.margin_loss
        return out


@dataclass(frozen=True)
class DocumentRunParams(RunParams):
    """How a document run scores document pairs (its method) and selects them (margin, one-to-one, threshold)."""

    KIND: ClassVar[str] = "document"

    method: DocMethod = param(
        DocMethod.RERANK,
        "rerank: retrieve with HiDE (Sentence-Avg without a model), pre-filter, re-rank with sentence votes.",
        label="Document method",
    )
    k: int = same_as(SentenceRunParams, "k")
    margin: Margin = same_as(SentenceRunParams, "margin")
    strategy: Strategy = same_as(SentenceRunParams, "strategy")
    threshold: float | None = same_as(SentenceRunParams, "threshold")
    neighbours: int = param(10, "Sentence neighbours N of the vote and of the count.", lo=1, hi=100)
    w1: float = param(5.0, "Sentence-vote weight w1 (the paper's).", label="w1")
    w2: float = param(-2.0, "Sentence-vote weight w2 (the paper's).", label="w2")
    vote_form: VoteForm = param(VoteForm.COUNTED, "Which sentence-vote formula.")
    top_n: int = param(5, "rerank: target documents retrieved per source document.", lo=1, hi=200, label="Top N")
    rerank_weight: float | None = param(
        None, "rerank: the vote's share of the combined score (blank: learnt on gold pairs, else 0.1).", lo=0.0, hi=1.0
    )
    prefilter: bool = param(True, "The Afli et al. pre-filter: rerank prunes with it, other methods mark pairs.")
    learn_share: float = param(
        0.5, "Share of the corpus's gold document pairs the run may learn from (the rest evaluate it).", lo=0.0, hi=1.0
    )
    seed: int = param(0, "Seeds the split of the gold pairs.", lo=0, hi=2**31 - 1)
    doc_model: int | None = param(None, "A document-model artefact id (blank: the pair's latest).", lo=1)
    calibrated_f1: bool = param(True, "The vote's f1 from the pair's calibration model when one fits.")
    site_scope: SiteScope | None = param(
        None,
        "Compare only pages of the same site: site (registered domain), host, or all pages "
        "(blank: site for a crawled corpus, all otherwise).",
        label="Site scope",
    )
    url_weight: float | None = param(
        None,
        "rerank: what a URL pair differing only by language markers (/en/ vs /fr/, fr.example.org, ?lang=de, "
        "page.fr.html) adds to the combined score (blank: the default, 0: URLs not read).",
        lo=0.0,
        hi=1.0,
        label="URL signal weight",
    )

    # Keys the shared run form stored on document runs before they had their own parameters: read and ignored.
    LEGACY: ClassVar[frozenset[str]] = frozenset({"knn", "filters", "nprobe"})

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> DocumentRunParams:
        """`from_dict` for a run's stored parameters, ignoring the keys older rows may carry (LEGACY)."""
        return cls.from_dict({k: v for k, v in (data or {}).items() if k not in cls.LEGACY})


def start_params(kind: str, values: dict[str, Any]) -> dict[str, Any]:
    """The parameters stored on a run started from the run form or the API: a document run's are
    DocumentRunParams', a self-training run's SelfTrainParams', every other kind's SentenceRunParams' (alignment
    reads its threshold). Only the fields of that class are read from `values`; ParamsError names each bad one."""
    by_kind: dict[str, type[RunParams]] = {cls.KIND: cls for cls in (DocumentRunParams, SelfTrainParams)}
    params = by_kind.get(kind, SentenceRunParams)
    names = [spec.name for spec in params.specs()]
    return params.from_dict({name: values[name] for name in names if name in values}).to_dict()
