"""Leave-one-collection-out choice of the decoy kind, the count's factor and the interval's systematic width
(bench/precision_estimate.py).

A row is one case (collection, language, margin setting) with, for every decoy variant, the decoy hits at the
label-free threshold (and at the rank-matched one, "@rank") and the decoys' number. For each collection left out in
turn, on the rows of the four others:

1. the decoy variant, among those the app could use in that situation (`FAMILIES`: with a disjoint collection of the
   target language, or without extra data), and the factor (the wrong pairs a decoy hit stands for, beyond
   targets / decoys: 1 for the plain count, or fitted from `C_GRID`) that put the estimate within 5 points of the
   measured precision in the most rows (ties: the smaller mean absolute error, the earlier variant, the factor
   nearer 1);
2. the systematic width r (``mining.core.precision``: the interval adds r times the estimated wrong pairs on both
   sides of the counting noise's bounds): the smallest r of `R_GRID` whose interval covers the measured precision in
   at least `COVER` of those rows.

Both are then reported on the collection left out. Last, the same choice on all five collections: the values the app
ships (``mining.core.precision.PLAN_DISJOINT`` / ``PLAN_FALLBACK``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mining.core.precision import estimate_precision

COVER = 0.95  # the interval's nominal confidence: the training coverage r must reach
R_GRID = tuple(round(0.02 * i, 2) for i in range(0, 101))  # 0 .. 2 by 0.02
C_GRID = tuple(round(0.05 * i, 2) for i in range(10, 61))  # 0.5 .. 3 by 0.05


@dataclass(frozen=True)
class Variant:
    kind: str  # "disjoint", "shuffled", "mutated:<rate>"
    cut: float | None = None  # near-copy cut (cosine to a real target sentence), None: keep every decoy

    @property
    def name(self) -> str:
        return self.kind + ("" if self.cut is None else f"/nd{self.cut:g}")


VARIANTS = (
    *(Variant("disjoint", c) for c in (None, 0.9, 0.8, 0.75, 0.7)),
    Variant("shuffled"),
    *(Variant(f"mutated:{r}") for r in (0.15, 0.3)),
)
# decoy hits counted at the run's threshold, or at the rank-matched one (matched_threshold); "w": each hit weighted
# by decoys.kind_weights (the decoys given the target side's spread of nearest-neighbour similarity)
MODES = ("", "@rank", "@w", "@w-rank")
_COUNT = {"": "hits", "rank": "hits_rank", "w": "hits_w", "w-rank": "hits_w_rank"}
FAMILIES = {
    "disjoint collection": [v.name + m for v in VARIANTS if v.kind == "disjoint" for m in MODES],
    "no extra data": [v.name + m for v in VARIANTS if v.kind != "disjoint" for m in MODES],
}


def estimate(row: dict, variant: str, r: float = 0.0, c: float = 1.0):
    name, _, mode = variant.partition("@")
    d = row["variants"][name]
    kept = np.ones(row["n_kept"])  # only the counts at the threshold matter
    weighted = mode.startswith("w")
    dec = np.ones(1 if weighted else d[_COUNT[mode]])  # a weighted count: one score carrying the hits' weight
    return estimate_precision(
        kept_scores=kept,
        decoy_scores=dec,
        decoy_weights=np.array([d[_COUNT[mode]]]) if weighted else None,
        threshold=1.0,
        n_targets=row["n_targets"],
        n_decoys=d["n_decoys"],
        systematic=r,
        factor=c,
    )


def _scored(rows: list[dict], variant: str, r: float = 0.0, c: float = 1.0) -> list[tuple[object, float]]:
    out = []
    for row in rows:
        e = estimate(row, variant, r, c)
        if e.ok:
            out.append((e, row["measured"]))
    return out


def _fit_point(rows: list[dict], family: list[str], factors: tuple[float, ...]) -> tuple[str, float]:
    """The variant and factor within 5 points of the measured precision in the most rows (ties: smaller mean absolute
    error, earlier variant, factor nearer 1)."""

    def key(choice: tuple[str, float]) -> tuple:
        v, c = choice
        s = _scored(rows, v, 0.0, c)
        within = sum(abs(e.precision - m) <= 0.05 for e, m in s)
        mae = float(np.mean([abs(e.precision - m) for e, m in s])) if s else 1.0
        return (-within, round(mae, 6), family.index(v), abs(c - 1.0))

    return min(((v, c) for v in family for c in factors), key=key)


def _fit_r(rows: list[dict], variant: str, c: float) -> float:
    for r in R_GRID:
        s = _scored(rows, variant, r, c)
        if s and sum(e.low <= m <= e.high for e, m in s) >= COVER * len(s):
            return r
    return R_GRID[-1]


@dataclass
class Held:
    collection: str
    variant: str
    c: float
    r: float
    n: int
    within: int
    covered: int
    widths: list[float]
    errors: list[float]


def loco(rows: list[dict], family: list[str], factors: tuple[float, ...]) -> list[Held]:
    out = []
    for col in dict.fromkeys(row["collection"] for row in rows):
        train = [row for row in rows if row["collection"] != col]
        test = [row for row in rows if row["collection"] == col]
        v, c = _fit_point(train, family, factors)
        r = _fit_r(train, v, c)
        s = _scored(test, v, r, c)
        out.append(
            Held(
                col,
                v,
                c,
                r,
                len(s),
                sum(abs(e.precision - m) <= 0.05 for e, m in s),
                sum(e.low <= m <= e.high for e, m in s),
                [e.high - e.low for e, _ in s],
                [e.precision - m for e, m in s],
            )
        )
    return out


def _cell(e) -> str:
    return "no estimate" if not e.ok else f"{100 * e.precision:.1f} [{100 * e.low:.1f}, {100 * e.high:.1f}]"


def report(rows: list[dict]) -> str:
    """The per-variant summary, the LOCO tables of both families (plain count, and with a fitted factor), and the
    per-case table at the values fitted on all collections (markdown)."""
    lines = [
        "| variant | estimates | within 5 points | mean abs error (points) | largest miss |",
        "|---|---:|---:|---:|---:|",
    ]
    for v in (n for f in FAMILIES.values() for n in f):
        s = _scored(rows, v)
        err = [100 * (e.precision - m) for e, m in s]
        worst = max(err, key=abs) if err else float("nan")
        lines.append(
            f"| {v} | {len(s)} | {sum(abs(x) <= 5 for x in err)} | {np.mean(np.abs(err)):.1f} | {worst:+.1f} |"
        )
    held_out: dict[str, dict[str, tuple[str, float, float]]] = {}
    for fam, members in FAMILIES.items():
        for how, factors in (("plain count", (1.0,)), ("fitted factor", C_GRID)):
            held = loco(rows, members, factors)
            held_out[f"{fam}, {how}"] = {h.collection: (h.variant, h.r, h.c) for h in held}
            lines += ["", f"Leave one collection out, decoys from: {fam}, {how}", ""]
            lines += [
                "| held out | variant (fit on the 4 others) | factor | r | estimates | within 5 points | "
                "interval covers | median width (points) | errors (points) |",
                "|---|---|---:|---:|---:|---:|---:|---:|---|",
            ]
            for h in held:
                lines.append(
                    f"| {h.collection} | {h.variant} | {h.c:.2f} | {h.r:.2f} | {h.n} | {h.within} | {h.covered} | "
                    f"{100 * np.median(h.widths):.1f} | {' '.join(f'{100 * x:+.1f}' for x in h.errors)} |"
                )
            n = sum(h.n for h in held)
            widths = [w for h in held for w in h.widths]
            lines.append(
                f"| **all** | | | | {n} | {sum(h.within for h in held)} | {sum(h.covered for h in held)} | "
                f"{100 * np.median(widths):.1f} | |"
            )
            v, c = _fit_point(rows, members, factors)
            r = _fit_r(rows, v, c)
            s = _scored(rows, v, r, c)
            lines.append(
                f"\nFitted on all five collections ({fam}, {how}): {v}, factor {c:.2f}, r = {r:.2f} (in-sample: "
                f"within 5 points {sum(abs(e.precision - m) <= 0.05 for e, m in s)}/{len(s)}, covers "
                f"{sum(e.low <= m <= e.high for e, m in s)}/{len(s)}, median width "
                f"{100 * np.median([e.high - e.low for e, _ in s]):.1f} points)"
            )
    shown = [f"{fam}, plain count" for fam in FAMILIES]
    lines += [
        "",
        "Per case, each estimate made with the choice fitted on the four other collections (leave one out):",
        "",
        "| case | margin | gold | kept | kept F1 | best F1 | mixture stated | "
        + " | ".join(f"decoys: {f.split(',')[0]}" for f in shown)
        + " | measured |",
        "|---|---|---:|---:|---:|---:|---:|" + "---|" * len(shown) + "---:|",
    ]
    for row in rows:
        cells = " | ".join(_cell(estimate(row, *held_out[f][row["collection"]])) for f in shown)
        lines.append(
            f"| {row['collection']} en-{row['lang']} | {row['setting']} | {row['gold']} | {row['n_kept']} | "
            f"{100 * row['f1']:.1f} | {100 * row['best_f1']:.1f} | {100 * row['mixture']:.1f} % | {cells} | "
            f"{100 * row['measured']:.1f} % |"
        )
    return "\n".join(lines)
