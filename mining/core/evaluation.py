"""BUCC-style evaluation of sentence mining: gold pairs hidden among non-parallel distractors, every
margin x strategy combination scored by P, R and F1 at its F1-best threshold, plus P@1 on the gold pairs alone.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mining.core.defaults import DEFAULT_K

from .candidates import Strategy, mine_candidates
from .knn import knn_both_ways, knn_exact
from .margin import Margin
from .metrics import precision_at_n
from .threshold import best_f1_threshold
from .types import KnnResult

_WORD = re.compile(r"\w+", re.UNICODE)


def near_duplicate_key(text: str) -> str:
    """A key equal for texts that differ only in case, punctuation, digits or spacing."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(w for w in _WORD.findall(folded) if not w.isdigit())


def n_words(text: str) -> int:
    """Number of word tokens."""
    return len(_WORD.findall(text))


@dataclass(frozen=True)
class BuccSet:
    """A mining test set: `gold` rows are (src index, tgt index) into the shuffled text lists."""

    src_texts: list[str]
    tgt_texts: list[str]
    gold: np.ndarray  # (m, 2) int64

    @property
    def parallel_share(self) -> float:
        """Share of source sentences that have a translation on the other side."""
        return len(self.gold) / max(1, len(self.src_texts))


def build_bucc(
    gold_pairs: Sequence[tuple[str, str]],
    src_distractors: Sequence[str],
    tgt_distractors: Sequence[str],
    *,
    n_gold: int | None = None,
    n_distractors: int | None = None,
    min_words: int = 5,
    seed: int = 0,
    known_pairs: Sequence[tuple[str, str]] = (),
    fuzzy: float | None = None,
    src_shadows: Sequence[Sequence[str]] | None = None,
    tgt_shadows: Sequence[Sequence[str]] | None = None,
) -> BuccSet:
    """Hide gold pairs among distractors with care: no near-duplicates anywhere, every sentence >= `min_words` words.

    Distractors that are near-duplicates of any gold sentence (on either side) are dropped, as are repeated gold
    pairs, so a "false" pair can never really be a translation that the gold list missed.

    Args:
        gold_pairs: (src, tgt) translations.
        src_distractors / tgt_distractors: non-parallel sentences (from other documents).
        n_gold / n_distractors: sample sizes per side (all when None).
        min_words: minimum words on the side being checked.
        seed: sampling and shuffling seed.
        known_pairs: every translation pair known from the source (e.g. all gold pairs of the collection);
            a distractor whose known translation is in the other side's pool is dropped, since a corpus that
            repeats boilerplate would otherwise hide real translations among the "non-parallel" sentences.
        fuzzy: also drop, by word-set Jaccard >= `fuzzy` (`fuzzy_matches`), distractors that nearly repeat a gold
            sentence of their language, and distractors with a shadow that nearly repeats a sentence of the other
            side (gold or distractor). Manuals reuse sentences across pages with small edits ("HSV: this choice
            displays..."), and such a near-copy's translation is a translation, not a distractor.
        src_shadows / tgt_shadows: one list per distractor (aligned with `src_distractors` / `tgt_distractors`):
            texts in the other language that may be its translation (e.g. the translated block of its page).
    """
    rng = np.random.default_rng(seed)
    seen: set[str] = set()
    gold: list[tuple[str, str]] = []
    for src, tgt in gold_pairs:
        ks, kt = near_duplicate_key(src), near_duplicate_key(tgt)
        if n_words(src) < min_words or n_words(tgt) < min_words or ks in seen or kt in seen or ks == kt:
            continue
        seen.update((ks, kt))
        gold.append((src, tgt))
    order = rng.permutation(len(gold))
    gold = [gold[i] for i in order[: n_gold or len(gold)]]
    src_idx = _clean_distractors(src_distractors, seen, min_words, rng)
    tgt_idx = _clean_distractors(tgt_distractors, seen, min_words, rng)
    if fuzzy is not None:
        src_idx, tgt_idx = _drop_fuzzy(
            gold, src_distractors, tgt_distractors, src_idx, tgt_idx, fuzzy, src_shadows, tgt_shadows
        )
    src_extra = [src_distractors[i] for i in src_idx]
    tgt_extra = [tgt_distractors[i] for i in tgt_idx]
    if known_pairs or gold:
        src_extra, tgt_extra = _drop_known_translations(src_extra, tgt_extra, [*known_pairs, *gold])
    src_extra = src_extra[: n_distractors or len(src_extra)]
    tgt_extra = tgt_extra[: n_distractors or len(tgt_extra)]
    src_texts = [s for s, _ in gold] + src_extra
    tgt_texts = [t for _, t in gold] + tgt_extra
    src_perm, tgt_perm = rng.permutation(len(src_texts)), rng.permutation(len(tgt_texts))
    src_pos, tgt_pos = np.argsort(src_perm), np.argsort(tgt_perm)
    gold_idx = np.stack([src_pos[: len(gold)], tgt_pos[: len(gold)]], axis=1).astype(np.int64)
    return BuccSet([src_texts[i] for i in src_perm], [tgt_texts[i] for i in tgt_perm], gold_idx)


def _drop_known_translations(
    src: list[str], tgt: list[str], known: Sequence[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    """Drop source distractors with a known translation among the target distractors, and vice versa."""
    src_keys = {near_duplicate_key(t) for t in src}
    tgt_keys = {near_duplicate_key(t) for t in tgt}
    bad_src, bad_tgt = set(), set()
    for a, b in known:
        ka, kb = near_duplicate_key(a), near_duplicate_key(b)
        if ka in src_keys and kb in tgt_keys:
            bad_src.add(ka)
            bad_tgt.add(kb)
    return (
        [t for t in src if near_duplicate_key(t) not in bad_src],
        [t for t in tgt if near_duplicate_key(t) not in bad_tgt],
    )


def _clean_distractors(texts: Sequence[str], seen: set[str], min_words: int, rng: np.random.Generator) -> list[int]:
    """Indices of the texts kept (long enough, no near-duplicate key seen before), in a seeded random order."""
    out: list[int] = []
    for i, text in enumerate(texts):
        key = near_duplicate_key(text)
        if n_words(text) < min_words or key in seen:
            continue
        seen.add(key)
        out.append(i)
    order = rng.permutation(len(out))
    return [out[i] for i in order]


def _word_sets(texts: Sequence[str]) -> tuple[list[int], list[int], dict[str, int]]:
    """Row and column indices of a (n, vocabulary) 0/1 matrix of each text's distinct words, and the vocabulary."""
    vocab: dict[str, int] = {}
    rows, cols = [], []
    for r, text in enumerate(texts):
        for w in set(near_duplicate_key(text).split()):
            rows.append(r)
            cols.append(vocab.setdefault(w, len(vocab)))
    return rows, cols, vocab


def fuzzy_matches(queries: Sequence[str], pool: Sequence[str], threshold: float) -> np.ndarray:
    """(len(queries),) bool: the query's word set has a Jaccard similarity >= `threshold` with some pool text's.

    Words as in `near_duplicate_key` (case, punctuation and digits ignored); one sparse product, no pair loop."""
    import scipy.sparse as sp

    if not len(queries) or not len(pool):
        return np.zeros(len(queries), dtype=bool)
    rows, cols, vocab = _word_sets([*queries, *pool])
    m = sp.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(len(queries) + len(pool), len(vocab)))
    q, p = m[: len(queries)], m[len(queries) :]
    qn, pn = np.asarray(q.sum(axis=1)).ravel(), np.asarray(p.sum(axis=1)).ravel()
    inter = (q @ p.T).tocoo()
    union = qn[inter.row] + pn[inter.col] - inter.data
    hit = inter.data >= threshold * np.maximum(union, 1)
    out = np.zeros(len(queries), dtype=bool)
    out[inter.row[hit]] = True
    return out


def _drop_fuzzy(
    gold: list[tuple[str, str]],
    src: Sequence[str],
    tgt: Sequence[str],
    src_idx: list[int],
    tgt_idx: list[int],
    threshold: float,
    src_shadows: Sequence[Sequence[str]] | None,
    tgt_shadows: Sequence[Sequence[str]] | None,
) -> tuple[list[int], list[int]]:
    """The distractor indices left after the fuzzy checks of `build_bucc` (order kept)."""
    src_side = [s for s, _ in gold] + [src[i] for i in src_idx]
    tgt_side = [t for _, t in gold] + [tgt[i] for i in tgt_idx]

    def keep(
        idx: list[int],
        texts: Sequence[str],
        gold_texts: list[str],
        shadows: Sequence[Sequence[str]] | None,
        other_side: list[str],
    ) -> list[int]:
        bad = fuzzy_matches([texts[i] for i in idx], gold_texts, threshold)
        if shadows is not None:
            # Shadows repeat (every sentence of a page whose blocks do not line up shares the whole translated
            # page), so each distinct shadow text is matched once.
            distinct: dict[str, int] = {}
            owner = np.array([j for j, i in enumerate(idx) for _ in shadows[i]], dtype=np.int64)
            text_id = np.array([distinct.setdefault(t, len(distinct)) for i in idx for t in shadows[i]], np.int64)
            hit = fuzzy_matches(list(distinct), other_side, threshold)[text_id] if len(text_id) else text_id > 0
            bad[owner[hit]] = True
        return [i for i, b in zip(idx, bad, strict=True) if not b]

    return (
        keep(src_idx, src, [s for s, _ in gold], src_shadows, tgt_side),
        keep(tgt_idx, tgt, [t for _, t in gold], tgt_shadows, src_side),
    )


@dataclass(frozen=True)
class MiningScore:
    """One configuration's result at its F1-best threshold."""

    margin: str
    strategy: str
    threshold: float
    precision: float
    recall: float
    f1: float
    n_candidates: int
    k: int = DEFAULT_K


def score_configurations(
    knn: KnnResult,
    gold: np.ndarray,
    *,
    k: int = DEFAULT_K,
    margins: Sequence[Margin] = tuple(Margin),
    strategies: Sequence[Strategy] = tuple(Strategy),
) -> list[MiningScore]:
    """P/R/F1 at the F1-best threshold of every margin x strategy on the same kNN (recall over all gold pairs), with
    neighbourhoods of `k` (the first k columns of `knn`)."""
    gold_keys = np.asarray(gold[:, 0], dtype=np.int64) * (knn.n_tgt + 1) + gold[:, 1]
    out: list[MiningScore] = []
    for margin in margins:
        for strategy in strategies:
            cands = mine_candidates(knn, margin=margin, k=k, strategy=strategy)
            keys = cands.src_idx.astype(np.int64) * (knn.n_tgt + 1) + cands.tgt_idx
            labels = np.isin(keys, gold_keys)
            if len(cands) == 0:
                out.append(MiningScore(margin.value, strategy.value, float("nan"), 0.0, 0.0, 0.0, 0, k))
                continue
            best = best_f1_threshold(cands.score, labels, n_positive=float(len(gold)))
            out.append(
                MiningScore(
                    margin.value,
                    strategy.value,
                    best.threshold,
                    best.precision,
                    best.recall,
                    best.f1,
                    int(len(cands)),
                    k,
                )
            )
    return out


def gold_p_at_1(src_emb: np.ndarray, tgt_emb: np.ndarray, gold: np.ndarray) -> float:
    """P@1 retrieving each gold source's translation among the gold targets only (the papers' retrieval task)."""
    s = src_emb[gold[:, 0]]
    t = tgt_emb[gold[:, 1]]
    _, ids = knn_exact(s, t, 1)
    return precision_at_n(ids, np.arange(len(gold)), 1)


def evaluate_mining(
    src_emb: np.ndarray,
    tgt_emb: np.ndarray,
    gold: np.ndarray,
    *,
    k: int | Sequence[int] = 4,
    knn_fn: Callable[[np.ndarray, np.ndarray, int], KnnResult] = knn_both_ways,
) -> tuple[list[MiningScore], float]:
    """Every margin x strategy's scores and the gold-only P@1 for one pair of embedding matrices.

    `k` may list several neighbourhood sizes: the kNN is searched once, at the largest, and every margin x
    strategy is scored at each (the paper's k = 4 suits sparse parallel data; with many near-paraphrases on the
    target side, as in a manual, a wider neighbourhood can separate translations better)."""
    ks = [int(k)] if isinstance(k, int | np.integer) else [int(x) for x in dict.fromkeys(k)]
    if not ks or min(ks) < 1:
        raise ValueError(f"k must be one or more sizes >= 1, got {k!r}")
    knn = knn_fn(src_emb, tgt_emb, max(ks))
    scores = [s for size in ks for s in score_configurations(knn, gold, k=size)]
    return scores, gold_p_at_1(src_emb, tgt_emb, gold)
