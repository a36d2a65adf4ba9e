"""The framework of typed parameters: a frozen dataclass per run kind (mining.params.kinds) or per campaign
(annotation.spec), its fields typed with the core's enums and their defaults, bounds and help in the field definitions.

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
    """A bound as a person reads it: integers whole (2147483647, not 2.14748e+09), other numbers short."""
    if x is None:
        return "any"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:g}"


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
            if f.name == cls.SETTINGS:
                continue
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

        Keys that are not fields are refused too, so a typo is never silently ignored (a class with an open
        `SETTINGS` field collects the names its `setting_names()` accepts there instead).
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
        extras = set(data) - names
        if cls.SETTINGS:
            nested = data.get(cls.SETTINGS) or {}
            settings = dict(nested) if isinstance(nested, dict) else {}
            open_names = cls.setting_names(values) if not errors else set()
            for name in sorted(extras & open_names):
                if data[name] is not None:
                    settings[name] = data[name]
            extras -= open_names
            values[cls.SETTINGS] = settings
        for extra in sorted(extras):
            errors[extra] = f"is not a parameter of {cls.KIND or cls.__name__} runs"
        if errors:
            raise ParamsError(errors)
        obj = cls(**values)  # type: ignore[call-arg]
        obj.check()
        return obj

    # Keys older rows may carry that are read and ignored, and keys renamed since (old -> new).
    LEGACY: ClassVar[frozenset[str]] = frozenset()
    RENAMED: ClassVar[dict[str, str]] = {}
    # The name of a dict field holding settings passed through to a model's own config class (training runs), or "".
    SETTINGS: ClassVar[str] = ""

    @classmethod
    def setting_names(cls, values: dict[str, Any]) -> set[str]:
        """The names the SETTINGS field accepts, given the other fields' parsed values (override)."""
        return set()

    @classmethod
    def from_stored(cls, data: dict[str, Any] | None) -> Self:
        """`from_dict` for a run's stored parameters: keys older rows carry are ignored (LEGACY) or renamed."""
        out: dict[str, Any] = {}
        for key, value in (data or {}).items():
            if key in cls.LEGACY:
                continue
            out.setdefault(cls.RENAMED.get(key, key), value)
        return cls.from_dict(out)

    def check(self) -> None:
        """Rules that involve several fields (override); raise ParamsError."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON stored in MiningRun.params (enums as their values; SETTINGS flattened beside the fields)."""
        out = {
            k: (v.value if isinstance(v, enum.Enum) else v)
            for k, v in dataclasses.asdict(self).items()  # type: ignore[call-overload]
        }
        if self.SETTINGS:
            out.update(out.pop(self.SETTINGS) or {})
        return out

    def scale_key(self, encoder: str) -> str:
        """The scoring configuration that defines the scale of this run's pair scores (for a run that scores pairs
        with `encoder`, "name vN"), so that a threshold found on one run applies only to runs of the same key; ""
        for a kind that scores no pairs."""
        return ""


def same_as(params: type[RunParams], name: str) -> Any:
    """A field with the default, bounds and help of `params`' field `name`: a parameter two run kinds share is
    still defined once."""
    source = params.__dataclass_fields__[name]  # type: ignore[attr-defined]
    return field(default=source.default, metadata=dict(source.metadata))
