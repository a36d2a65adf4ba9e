"""A sentence run's candidates re-ranked by a scorer trained on the run itself (``SentenceRunParams.rescore`` =
evidence; issue 31, item 4), in the configuration ``bench/evidence_scorer.py`` chose leave-one-collection-out at the
default setting (docs/BENCHMARKS.md, "Mining quality: evidence beside the margin"):

- features "text+dict": the margin score, the cosine and ``evidence.pair_evidence`` (the dictionary columns where
  both word maps are installed);
- positives: the run's confident pairs (``selftrain_pairs.confident_count`` over its mutual-best candidates past the
  pre-filters); negatives: each confident source with its next-best neighbour (``neighbour_pairs``);
- ``evidence_scorer.fit_logistic`` with L2 = 100; the candidates' new scores are its log-odds;
- the label-free threshold "median3": the median of three counts (as many pairs as the margin's default threshold
  keeps; the default threshold's mixture on the log-odds; the F1 the model's own probabilities expect).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from mining.core.default_threshold import MIN_CANDIDATES, default_threshold
from mining.core.dictionaries import WordMap, load_dictionary
from mining.core.evidence import BASE_FEATURES, DICT_FEATURES, Evidence, pair_evidence, text_info
from mining.core.evidence_scorer import LogisticModel, expected_f1_count, fit_logistic, neighbour_negatives
from mining.core.margin import Margin, margin_score, neighbourhood_means
from mining.core.selftrain_pairs import confident_count
from mining.core.types import Candidates, Direction, KnnResult

SCORER_FEATURES: tuple[str, ...] = ("score", "cosine", *BASE_FEATURES, *DICT_FEATURES)
SCORER_L2 = 100.0
MIN_POSITIVES = 10  # fewer confident pairs than this: no scorer (the bench's floor)
THRESHOLD_RULE = "median3"
_BOTH = int(Direction.FORWARD | Direction.BACKWARD)


def dictionaries_for(src_lang: str, tgt_lang: str, texts: Iterable[str]) -> tuple[WordMap | None, WordMap | None]:
    """Both directions' installed FreeDict word maps, only for the words of these texts as ``evidence`` reads them
    (so a pair's dictionary features do not hang on which other texts were loaded with it); None where missing."""
    vocab = {w for t in texts for w in text_info(t).words}
    return (
        load_dictionary(src_lang, tgt_lang, vocabulary=vocab),
        load_dictionary(tgt_lang, src_lang, vocabulary=vocab),
    )


def scorer_matrix(score: np.ndarray, cosine: np.ndarray, evidence: Evidence) -> tuple[np.ndarray, tuple[str, ...]]:
    """(n, f) float64 features of n pairs in SCORER_FEATURES order (the dictionary columns only where
    ``evidence`` has them), and their names."""
    names = ("score", "cosine", *(f for f in SCORER_FEATURES[2:] if f in evidence.names))
    cols = [evidence.names.index(f) for f in names[2:]]
    x = np.column_stack([np.asarray(score, np.float64), np.asarray(cosine, np.float64), evidence.values[:, cols]])
    return x, names


def neighbour_pairs(
    tgt_idx: np.ndarray, fwd_ids: np.ndarray, fwd_sims: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each pair's next-best target: the first in its source's kNN list that is not its own target.

    Args:
        tgt_idx: (m,) int64 the pairs' targets.
        fwd_ids, fwd_sims: (m, k) the pairs' sources' neighbours (ids, -1 = none; similarities), best first.

    Returns:
        (rows, targets, cosines): the pairs that have one (int64 rows into the m), that target, its similarity.
    """
    rows, nb = neighbour_negatives(np.arange(len(tgt_idx)), np.asarray(tgt_idx), np.asarray(fwd_ids))
    col = (np.asarray(fwd_ids)[rows] == nb[:, None]).argmax(axis=1)
    return rows, nb, np.asarray(fwd_sims)[rows, col].astype(np.float32)


def candidate_neighbours(knn: KnnResult, cands: Candidates, k: int, margin: Margin) -> dict[str, np.ndarray]:
    """Every candidate's next-best target (``neighbour_pairs`` over its source's first k neighbours) with that pair's
    cosine and margin score, the negatives the scorer may train on.

    Returns:
        {"rows": (r,) int64 candidate rows that have one, "tgt": (r,) int64, "cosine": (r,) float32,
        "score": (r,) float32}.
    """
    k = min(k, knn.k)
    bi, bs = knn.bwd_ids[:, :k], knn.bwd_sims[:, :k]
    bwd_mean = neighbourhood_means(np.where(bi >= 0, bs, -np.inf), k)
    rows, tgt, cos = neighbour_pairs(cands.tgt_idx, knn.fwd_ids[cands.src_idx, :k], knn.fwd_sims[cands.src_idx, :k])
    score = margin_score(cos, cands.fwd_mean[rows], bwd_mean[tgt], margin).astype(np.float32)
    return {"rows": rows.astype(np.int64), "tgt": tgt.astype(np.int64), "cosine": cos, "score": score}


def confident_rows(score: np.ndarray, direction: np.ndarray, passed: np.ndarray) -> tuple[np.ndarray, str]:
    """The candidate rows of the run's confident pairs (self-training's rule over its mutual-best candidates past
    the pre-filters), best first, and the rule that chose them. Candidates sorted by score descending."""
    rows = np.flatnonzero(np.asarray(passed, bool) & (np.asarray(direction) == _BOTH) & np.isfinite(score))
    m, _, _, rule = confident_count(np.asarray(score)[rows])
    return rows[:m], rule


def train_scorer(x_pos: np.ndarray, x_neg: np.ndarray, names: tuple[str, ...], l2: float = SCORER_L2) -> LogisticModel:
    """The logistic regression of positives (n_p, f) against negatives (n_n, f)."""
    x = np.vstack([x_pos, x_neg])
    y = np.r_[np.ones(len(x_pos), bool), np.zeros(len(x_neg), bool)]
    return fit_logistic(x, y, l2=l2, names=names)


@dataclass(frozen=True)
class RescoreThreshold:
    """The median3 cut of the log-odds: ``threshold`` keeps ``n_kept`` pairs (None when too few candidates are
    mutual to read a cut from, see ``reason``); ``counts`` holds the three counts it took the median of."""

    threshold: float | None
    n_kept: int
    counts: dict[str, int]
    reason: str = ""


def median3_threshold(logit: np.ndarray, margin: np.ndarray, mutual: np.ndarray) -> RescoreThreshold:
    """The label-free threshold of re-scored candidates (the bench's median3 rule).

    Args:
        logit: (n,) the scorer's log-odds of the candidates past the pre-filters.
        margin: (n,) their margin scores (the count the margin's own default threshold keeps is one of the three).
        mutual: (n,) bool, found from both sides.
    """
    logit, margin, mutual = np.asarray(logit, np.float64), np.asarray(margin, np.float64), np.asarray(mutual, bool)
    if int(mutual.sum()) < MIN_CANDIDATES:
        return RescoreThreshold(
            None,
            len(logit),
            {},
            f"{int(mutual.sum())} candidates found from both sides passed the pre-filters; a threshold without "
            f"labels needs at least {MIN_CANDIDATES}",
        )
    order = np.argsort(-logit, kind="stable")
    counts = {
        "same_count": int((margin >= default_threshold(margin, mutual).threshold).sum()),
        "mixture": int((logit >= default_threshold(logit, mutual).threshold).sum()),
        "expected_f1": expected_f1_count(1.0 / (1.0 + np.exp(-logit[order]))),
    }
    m = int(np.median(list(counts.values())))
    if m == 0:
        return RescoreThreshold(None, len(logit), counts, "the rules keep no pair")
    threshold = float(logit[order[m - 1]])
    return RescoreThreshold(threshold, int((logit >= threshold).sum()), counts)


def model_to_dict(model: LogisticModel) -> dict:
    """JSON-ready coefficients (for ``run.stats``; ``model_from_dict`` reads them back exactly)."""
    return {
        "names": list(model.names),
        "mean": [float(v) for v in model.mean],
        "scale": [float(v) for v in model.scale],
        "coef": [float(v) for v in model.coef],
        "intercept": float(model.intercept),
    }


def model_from_dict(d: dict) -> LogisticModel:
    """The model ``model_to_dict`` stored."""
    return LogisticModel(
        mean=np.asarray(d["mean"], np.float64),
        scale=np.asarray(d["scale"], np.float64),
        coef=np.asarray(d["coef"], np.float64),
        intercept=float(d["intercept"]),
        names=tuple(d["names"]),
    )


@dataclass(frozen=True)
class Rescored:
    """The candidates' new scores and how they were made.

    Attributes:
        logit: (n,) float64 log-odds of every candidate given.
        model: the fitted scorer.
        cut: the median3 threshold over the candidates past the pre-filters.
        used: the evidence kinds that went in ("text", "dictionary").
        length_center: the candidates' log length ratio centre (``pair_evidence``), to score other pairs alike.
    """

    logit: np.ndarray
    model: LogisticModel
    cut: RescoreThreshold
    used: tuple[str, ...]
    length_center: float


def rescore(
    *,
    cands: tuple[np.ndarray, np.ndarray, list[str], list[str]],
    passed: np.ndarray,
    mutual: np.ndarray,
    positives: tuple[np.ndarray, np.ndarray, list[str], list[str]],
    negatives: tuple[np.ndarray, np.ndarray, list[str], list[str]],
    dicts: tuple[WordMap | None, WordMap | None] = (None, None),
) -> Rescored:
    """Train the scorer on positives against negatives and score the candidates with it.

    Args:
        cands, positives, negatives: each (score (m,), cosine (m,), source texts, target texts) of its pairs.
        passed: (n,) bool, the candidates past the pre-filters (the threshold and the length centre are read off
            them); mutual: (n,) bool, found from both sides.
        dicts: the source-to-target and target-to-source word maps (None where not installed: the dictionary
            features are dropped).

    Raises:
        ValueError: fewer than MIN_POSITIVES positives or no negative.
    """
    if len(positives[0]) < MIN_POSITIVES or len(negatives[0]) == 0:
        raise ValueError(
            f"{len(positives[0])} confident pairs and {len(negatives[0])} negatives; the scorer needs at least "
            f"{MIN_POSITIVES} and one"
        )
    passed = np.asarray(passed, bool)
    src_to_tgt, tgt_to_src = dicts

    def evidence(texts_s: list[str], texts_t: list[str], center: float | None = None) -> Evidence:
        return pair_evidence(texts_s, texts_t, src_to_tgt=src_to_tgt, tgt_to_src=tgt_to_src, length_center=center)

    xp, names = scorer_matrix(positives[0], positives[1], evidence(positives[2], positives[3]))
    xn, _ = scorer_matrix(negatives[0], negatives[1], evidence(negatives[2], negatives[3]))
    model = train_scorer(xp, xn, names)
    score, cosine, src_texts, tgt_texts = cands
    kept = np.flatnonzero(passed)
    ev_kept = evidence([src_texts[i] for i in kept], [tgt_texts[i] for i in kept])
    rest = np.flatnonzero(~passed)
    ev_rest = evidence([src_texts[i] for i in rest], [tgt_texts[i] for i in rest], ev_kept.length_center)
    values = np.zeros((len(passed), len(ev_kept.names)))
    values[kept], values[rest] = ev_kept.values, ev_rest.values
    x, _ = scorer_matrix(score, cosine, Evidence(ev_kept.names, values, ev_kept.used, ev_kept.length_center))
    logit = model.logit(x)
    cut = median3_threshold(logit[passed], np.asarray(score)[passed], np.asarray(mutual, bool)[passed])
    return Rescored(logit=logit, model=model, cut=cut, used=ev_kept.used, length_center=ev_kept.length_center)


def score_pairs(
    model: LogisticModel,
    score: np.ndarray,
    cosine: np.ndarray,
    src_texts: list[str],
    tgt_texts: list[str],
    *,
    length_center: float,
    dicts: tuple[WordMap | None, WordMap | None] = (None, None),
) -> np.ndarray:
    """(m,) float64 log-odds of other pairs (a run's decoy hits) under a run's stored scorer and length centre.

    Raises:
        ValueError: the model needs dictionary features and ``dicts`` lacks a word map.
    """
    ev = pair_evidence(src_texts, tgt_texts, src_to_tgt=dicts[0], tgt_to_src=dicts[1], length_center=length_center)
    x, names = scorer_matrix(score, cosine, ev)
    if names != model.names:
        raise ValueError(f"the scorer was trained on {model.names}; these pairs have {names}")
    return model.logit(x)
