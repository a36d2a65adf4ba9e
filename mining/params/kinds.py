"""One frozen parameter class per run kind (all nine), each field's type, default, bounds and help defined once.

Every entry point (the run form, the API, the management commands, the services that start runs) builds the typed
object with `from_dict()` and `run_create` stores its `to_dict()`; every handler reads `params_of(run)`."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..core.defaults import DEFAULT_ENCODER, DEFAULT_K
from ..core.enums import DocMethod, IndexStore, KnnMethod, Margin, Rescore, SiteScope, Strategy, VoteForm
from .base import ParamsError, RunParams, param, same_as


@dataclass(frozen=True)
class SentenceRunParams(RunParams):
    """How a sentence-mining run embeds, searches, scores, selects and filters."""

    KIND: ClassVar[str] = "sentence"

    knn: KnnMethod = param(KnnMethod.EXACT, "Exact (flat) or approximate (IVF) nearest-neighbour search.", label="kNN")
    margin: Margin = param(Margin.RATIO, "How a pair's cosine is scored against its neighbourhoods.")
    k: int = param(DEFAULT_K, "Neighbours per sentence for the margin and the candidates.", lo=1, hi=64)
    strategy: Strategy = param(Strategy.MAX_SCORE, "How candidates are selected from both directions.")
    threshold: float | None = param(None, "Keep pairs scoring at least this (blank: keep all).")
    filters: bool = param(True, "Apply the pre-filters (language, length ratio, numbers, copies).", label="Pre-filters")
    nprobe: int = param(16, "Inverted lists an IVF search visits per query.", lo=1, hi=4096, label="IVF nprobe")
    index: IndexStore = param(
        IndexStore.AUTO,
        "IVF index shards as float32 rows (flat) or compressed codes re-scored exactly (pq); auto: pq from "
        "10M sentences a side.",
        label="Index shards",
    )
    site: str = param(
        "",
        "Mine only the sentences of this site's pages (a registered domain of a crawled corpus; blank: all).",
        label="Site",
    )
    rescore: Rescore = param(
        Rescore.NONE,
        "Re-rank the candidates with a scorer trained on this run's own confident pairs against their next-best "
        "neighbours, from the margin, the cosine and textual evidence (numbers, names, URLs, placeholders, a "
        "bilingual dictionary where Debian's FreeDict is installed); no labels used. Scores become its log-odds "
        "(a threshold given is one on them).",
        label="Re-score",
    )

    def check(self) -> None:
        if self.index is IndexStore.PQ and self.knn is KnnMethod.EXACT:
            raise ParamsError({"index": "compressed (pq) index shards are searched approximately: set kNN to ivf"})

    def scale_key(self, encoder: str) -> str:
        key = f"{encoder}/{self.margin.value}/k={self.k}/{self.strategy.value}"
        # log-odds are another scale than the margin: a re-scored run's thresholds are stored apart
        return key if self.rescore is Rescore.NONE else f"{key}/rescore={self.rescore.value}"


@dataclass(frozen=True)
class SelfTrainParams(RunParams):
    """How a self-training run mines its own corpus and trains an adapter on the pairs it is sure of."""

    KIND: ClassVar[str] = "self_train"

    base: str = param(DEFAULT_ENCODER, "Registry name of the pretrained encoder that is adapted.")
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

    def scale_key(self, encoder: str) -> str:
        return f"document {self.method.value}/{encoder}/{self.margin.value}/k={self.k}/{self.strategy.value}"


@dataclass(frozen=True)
class AlignRunParams(RunParams):
    """Which document pairs of its parent document run an alignment run aligns (the languages, corpora and pairs
    come from the parent; the encoder from the run)."""

    KIND: ClassVar[str] = "align"

    doc_threshold: float | None = param(
        None,
        "Align only the document pairs scoring at least this on the document run's scale (blank: every pair).",
        label="Document-pair threshold",
    )
    # Alignment runs stored the document-pair threshold as "threshold" before it had its own name.
    RENAMED: ClassVar[dict[str, str]] = {"threshold": "doc_threshold"}
    LEGACY: ClassVar[frozenset[str]] = frozenset({"knn", "margin", "k", "strategy", "filters", "nprobe", "site"})

    def scale_key(self, encoder: str) -> str:
        return f"align/{encoder}"


class EncoderModel(enum.StrEnum):
    """What a TRAIN_ENCODER run trains."""

    DAN = "dan"  # the app's DAN dual encoder
    ADAPTER = "adapter"  # a trained tower per language over a pretrained encoder


@dataclass(frozen=True)
class TrainEncoderParams(RunParams):
    """A sentence encoder trained on the corpus's gold pairs; the model's own settings (DanConfig's or
    AdapterConfig's fields: epochs, lr, margin, ...) are passed through to its config class, which checks them."""

    KIND: ClassVar[str] = "train_encoder"
    SETTINGS: ClassVar[str] = "settings"

    model: EncoderModel = param(EncoderModel.DAN, "dan: the app's DAN; adapter: a tower per language over the base.")
    base: str = param(DEFAULT_ENCODER, "The adapter's pretrained encoder (registry name).")
    seed: int = param(0, "Seeds the weights, splits and batches.", lo=0, hi=2**31 - 1)
    max_pairs: int | None = param(None, "Train on at most this many of the corpus's gold pairs (blank: all).", lo=1)
    background: str = param("", "Another corpus whose gold pairs are trained on too (general text; blank: none).")
    hard_negative_stage: bool = param(True, "DAN only: a second stage with hard negatives.")
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def setting_names(cls, values: dict[str, Any]) -> set[str]:
        from ..core.encoders.configs import AdapterConfig, DanConfig

        config = AdapterConfig if values.get("model") == EncoderModel.ADAPTER else DanConfig
        return {f.name for f in dataclasses.fields(config)} - {"hidden"} - {s.name for s in cls.specs()}

    def check(self) -> None:
        from ..core.encoders.configs import AdapterConfig, DanConfig

        config = AdapterConfig if self.model == EncoderModel.ADAPTER else DanConfig
        try:
            config(**self.settings)
        except (TypeError, ValueError) as exc:
            raise ParamsError({"settings": str(exc)}) from None


class DocModel(enum.StrEnum):
    """What a TRAIN_DOC_MODEL run trains (also the artefact's name)."""

    HIDE = "hide"
    BOW = "bow"


@dataclass(frozen=True)
class TrainDocModelParams(RunParams):
    """A document model trained on the corpus's gold document pairs; the model's own settings (HideConfig's or
    DanConfig's fields) are passed through to its config class."""

    KIND: ClassVar[str] = "train_doc_model"
    SETTINGS: ClassVar[str] = "settings"

    model: DocModel = param(DocModel.HIDE, "hide: HiDE over sentence embeddings; bow: Document BoW on whole texts.")
    seed: int = param(0, "Seeds the weights, the validation split and the batches.", lo=0, hi=2**31 - 1)
    validation: float | None = param(
        None, "HiDE only: the share of gold pairs held out to pick the epoch (blank: the default).", lo=0.0, hi=0.9
    )
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def setting_names(cls, values: dict[str, Any]) -> set[str]:
        from ..core.docmatch import HideConfig
        from ..core.encoders.configs import DanConfig

        config = HideConfig if values.get("model", DocModel.HIDE) == DocModel.HIDE else DanConfig
        return {f.name for f in dataclasses.fields(config)} - {s.name for s in cls.specs()}

    def check(self) -> None:
        if self.model == DocModel.BOW and self.validation is not None:
            raise ParamsError({"validation": "is read by HiDE only, not by bow"})


class CalibrationMethod(enum.StrEnum):
    """How a CALIBRATE run maps scores to P(good)."""

    HEAD = "head"  # the source-aware calibration head
    PLATT = "platt"
    ISOTONIC = "isotonic"


@dataclass(frozen=True)
class CalibrateParams(RunParams):
    """A calibration model of a language pair trained on its reviewers' labels."""

    KIND: ClassVar[str] = "calibrate"

    method: CalibrationMethod = param(CalibrationMethod.HEAD, "The calibration model kept (all are cross-validated).")
    campaign: int | None = param(None, "Train on this campaign's labels (blank: every label of the pair).", lo=1)
    seed: int = param(0, "Seeds the cross-validation folds.", lo=0, hi=2**31 - 1)


@dataclass(frozen=True)
class ApplyCalibrationParams(RunParams):
    """Recompute the calibrated confidences of the parent run's candidates with a calibration model."""

    KIND: ClassVar[str] = "apply_calibration"

    calibration: int | None = param(None, "The calibration model's artefact id.", lo=1)

    def check(self) -> None:
        if self.calibration is None:
            raise ParamsError({"calibration": "is required"})


@dataclass(frozen=True)
class FineTuneParams(RunParams):
    """Fine-tune a DAN encoder on the pair's reviews, gated on a held-out evaluation corpus."""

    KIND: ClassVar[str] = "fine_tune"

    eval_corpus: int | None = param(None, "The held-out corpus with gold sentence pairs the result is gated on.", lo=1)
    campaign: int | None = param(None, "Fine-tune on this campaign's labels (blank: every review of the pair).", lo=1)
    seed: int = param(0, "Seeds the fine-tuning and the evaluation sample.", lo=0, hi=2**31 - 1)
    eval_share: float = param(
        0.2, "Share of the evaluation corpus's gold pairs hidden among its sentences.", lo=0.01, hi=1.0
    )
    eval_gold: int | None = param(None, "At most this many gold pairs in the evaluation (blank: all).", lo=2)
    eval_min_words: int = param(5, "Evaluation sentences have at least this many words.", lo=0, hi=100)
    hard_quantile: float = param(
        0.5, "BAD pairs scoring above this quantile of their run are hard negatives.", lo=0.0, hi=1.0
    )
    replay: int = param(5000, "The encoder's own training pairs replayed beside the reviews.", lo=0)
    epochs: int | None = param(None, "Fine-tuning epochs (blank: the default).", lo=1, hi=100)
    lr: float | None = param(None, "Learning rate (blank: the default).", lo=1e-7, hi=1.0)
    emb_lr: float | None = param(None, "The embeddings' learning rate (blank: the default).", lo=0.0, hi=1.0)
    validation_share: float | None = param(
        None, "Share of the pairs held out for early stopping (blank: the default).", lo=0.0, hi=0.9
    )

    def check(self) -> None:
        if self.eval_corpus is None:
            raise ParamsError({"eval_corpus": "a held-out evaluation corpus with gold sentence pairs is required"})

    def config_overrides(self) -> dict[str, Any]:
        """The FineTuneConfig fields these parameters set."""
        names = ("epochs", "lr", "emb_lr", "validation_share")
        return {name: getattr(self, name) for name in names if getattr(self, name) is not None}


PARAMS: dict[str, type[RunParams]] = {
    cls.KIND: cls
    for cls in (
        SentenceRunParams,
        DocumentRunParams,
        AlignRunParams,
        TrainEncoderParams,
        TrainDocModelParams,
        CalibrateParams,
        ApplyCalibrationParams,
        FineTuneParams,
        SelfTrainParams,
    )
}
"""Each run kind's parameter class (the keys are RunKind's values)."""


def params_class(kind: str) -> type[RunParams]:
    """The parameter class of a run kind; ValueError for an unknown kind."""
    try:
        return PARAMS[kind]
    except KeyError:
        raise ValueError(f"unknown run kind {kind!r}") from None


def stored_params(kind: str, data: dict[str, Any] | None) -> RunParams:
    """A run's stored parameters, typed (its kind's class, older rows' keys mapped: `from_stored`)."""
    return params_class(kind).from_stored(data)


def start_params(kind: str, values: dict[str, Any], *, only_fields: bool = False) -> RunParams:
    """The typed parameters of a run started from the run form, the API or a command: `values` are checked by the
    kind's class (ParamsError names each bad field, a field of another kind included; with `only_fields`, as for a
    form whose other kinds' fields are hidden, only the kind's fields are read)."""
    cls = params_class(kind)
    if only_fields:
        names = {spec.name for spec in cls.specs()}
        values = {k: v for k, v in values.items() if k in names}
    return cls.from_dict(values)
