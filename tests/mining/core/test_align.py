"""The aligner against a hand-made gold ladder, and linear memory on long documents."""

import numpy as np

from mining.core.align import AlignConfig, align, score_alignment, sentence_pairs


def _ladder(seed: int = 0, d: int = 32):
    """Source and target 'sentences' built from concepts; the gold ladder has 1:1, 1:2, 2:1, 0:1 and 1:0 beads."""
    rng = np.random.default_rng(seed)
    concepts = rng.normal(size=(12, d))
    # bead plan: (source concept ids, target concept ids)
    plan = [
        ([0], [0]),
        ([1], [1, 2]),
        ([3, 4], [3]),
        ([5], [5]),
        ([], [6]),
        ([7], [7]),
        ([8], []),
        ([9], [9]),
        ([10, 11], [10, 11]),
    ]
    src, tgt, gold, si, ti = [], [], [], 0, 0
    for s_ids, t_ids in plan:
        if s_ids == [10, 11]:  # a 2:2 bead written as two 1:1 beads
            for c in (10, 11):
                src.append(concepts[c] + 0.05 * rng.normal(size=d))
                tgt.append(concepts[c] + 0.05 * rng.normal(size=d))
                gold.append((range(si, si + 1), range(ti, ti + 1)))
                si, ti = si + 1, ti + 1
            continue
        # a merged side's sentences are parts of the concept: halves that add up to it
        for c in s_ids:
            src.append(concepts[c] + 0.05 * rng.normal(size=d))
        for c in t_ids:
            tgt.append(concepts[c] + 0.05 * rng.normal(size=d))
        gold.append((range(si, si + len(s_ids)), range(ti, ti + len(t_ids))))
        si, ti = si + len(s_ids), ti + len(t_ids)
    src, tgt = np.array(src), np.array(tgt)
    # make merged beads genuinely merged: the single side is the sum of the concepts on the other side
    src[1 + 0] = concepts[1] + concepts[2]
    tgt[3] = concepts[3] + concepts[4]
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    return src.astype(np.float32), tgt.astype(np.float32), gold


def test_recovers_the_hand_made_ladder():
    src, tgt, gold = _ladder()
    beads = align(src, tgt, np.full(len(src), 40.0), np.full(len(tgt), 40.0))
    pred = [(range(b.src_start, b.src_end), range(b.tgt_start, b.tgt_end)) for b in beads]
    strict, lax = score_alignment(pred, gold)
    assert strict.f1 == 1.0, pred
    assert lax.f1 == 1.0
    assert all(b.cosine > 0.9 for b in sentence_pairs(beads))


def test_a_weak_pair_is_not_merged_into_its_identical_neighbour():
    """Manual pages: "3.7." / "Copy and Paste" against "3.7." / "Copier-Coller". The number pairs are identical, the
    titles only loosely similar; merging a title with the next number (2:2) must not beat two 1:1 beads, or the bead
    crosses a paragraph boundary. A real split (one sentence translated as two) must still merge."""
    rng = np.random.default_rng(3)
    d = 32
    num = rng.normal(size=(3, d))
    title = rng.normal(size=(3, d))
    t_title = 0.55 * title + rng.normal(size=(3, d))  # loose translations: cosine about 0.5
    src = np.array([num[0], title[0], num[1], title[1], num[2], title[2]])
    tgt = np.array([num[0], t_title[0], num[1], t_title[1], num[2], t_title[2]])
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    lengths = np.array([4.0, 14.0] * 3)
    beads = align(src, tgt, lengths, lengths)
    assert [(b.src_start, b.src_end, b.tgt_start, b.tgt_end) for b in beads] == [(i, i + 1, i, i + 1) for i in range(6)]

    halves = rng.normal(size=(2, d))
    whole = halves.sum(0)
    src2 = np.array([whole, num[0]])
    tgt2 = np.array([halves[0] + 0.2 * rng.normal(size=d), halves[1] + 0.2 * rng.normal(size=d), num[0]])
    src2 /= np.linalg.norm(src2, axis=1, keepdims=True)
    tgt2 /= np.linalg.norm(tgt2, axis=1, keepdims=True)
    beads = align(src2, tgt2, np.array([40.0, 4.0]), np.array([20.0, 20.0, 4.0]))
    assert [(b.src_start, b.src_end, b.tgt_start, b.tgt_end) for b in beads] == [(0, 1, 0, 2), (1, 2, 2, 3)]


def test_score_alignment_strict_and_lax():
    gold = [(range(0, 1), range(0, 1)), (range(1, 3), range(1, 2))]
    pred = [(range(0, 1), range(0, 1)), (range(1, 2), range(1, 2)), (range(2, 3), range(2, 3))]
    strict, lax = score_alignment(pred, gold)
    assert (strict.precision, strict.recall) == (1 / 3, 1 / 2)
    assert lax.precision == 2 / 3 and lax.recall == 1.0


def test_long_documents_align_coarse_to_fine_in_a_band():
    rng = np.random.default_rng(1)
    n, d = 3000, 16
    base = rng.normal(size=(n, d))
    src = base + 0.1 * rng.normal(size=(n, d))
    keep = np.ones(n, bool)
    keep[rng.choice(n, 30, replace=False)] = False  # 30 source sentences have no translation
    tgt = (base + 0.1 * rng.normal(size=(n, d)))[keep]
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    cfg = AlignConfig(max_cells=100_000)
    beads = sentence_pairs(align(src, tgt, np.full(n, 50.0), np.full(len(tgt), 50.0), cfg))
    tgt_of = np.cumsum(keep) - 1
    correct = sum(
        1
        for b in beads
        if b.src_end - b.src_start == 1
        and b.tgt_end - b.tgt_start == 1
        and keep[b.src_start]
        and tgt_of[b.src_start] == b.tgt_start
    )
    assert correct >= 0.98 * keep.sum()


def _oracle_beads(src, tgt, slen, tlen, cfg):
    """Cell-by-cell DP over the full grid with the documented costs (the vectorised banded DP must agree)."""
    from scipy.stats import norm

    n, m = len(src), len(tgt)
    cost = np.full((n + 1, m + 1), np.inf)
    cost[0, 0] = 0.0
    back = {}
    for i in range(n + 1):
        for j in range(m + 1):
            for a, b in sorted(cfg.beads, key=lambda ab: ab[0] == 0):  # ties: 0:1 (the row scan) loses
                if (i, j) == (0, 0) or i < a or j < b or (a == 0 and b != 1):
                    continue
                if a == 0 or b == 0:
                    step = cfg.skip_cost * (a + b)
                else:
                    s, t = src[i - a : i].sum(0), tgt[j - b : j].sum(0)
                    cos = s @ t / (np.linalg.norm(s) * np.linalg.norm(t))
                    ls, lt = slen[i - a : i].sum(), tlen[j - b : j].sum()
                    delta = (lt - ls) / np.sqrt(6.8 * max((ls + lt) / 2, 1.0))
                    step = (
                        (1 - cos) * (a + b) / 2
                        - cfg.length_weight * (np.log(2) + norm.logcdf(-abs(delta)))
                        + cfg.merge_penalty * (a + b - 2)
                    )
                if cost[i - a, j - b] + step < cost[i, j] - 1e-12:
                    cost[i, j], back[i, j] = cost[i - a, j - b] + step, (a, b)
    out, i, j = [], n, m
    while (i, j) != (0, 0):
        a, b = back[i, j]
        out.append((i - a, i, j - b, j))
        i, j = i - a, j - b
    return out[::-1]


def test_vectorised_dp_matches_a_cell_by_cell_oracle():
    rng = np.random.default_rng(4)
    for n, m in [(1, 1), (3, 7), (9, 4), (12, 12), (10, 13)]:
        base = rng.normal(size=(max(n, m), 8))
        src, tgt = base[:n] + 0.7 * rng.normal(size=(n, 8)), base[:m] + 0.7 * rng.normal(size=(m, 8))
        src /= np.linalg.norm(src, axis=1, keepdims=True)
        tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
        slen, tlen = rng.integers(5, 150, n).astype(float), rng.integers(5, 150, m).astype(float)
        beads = align(src, tgt, slen, tlen)
        assert [(b.src_start, b.src_end, b.tgt_start, b.tgt_end) for b in beads] == _oracle_beads(
            src, tgt, slen, tlen, AlignConfig()
        )


def test_align_runs_on_one_blas_thread_and_restores_the_setting(monkeypatch):
    from threadpoolctl import threadpool_info, threadpool_limits

    from mining.core import align as align_module

    def blas_threads() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    seen, real = [], align_module._align
    monkeypatch.setattr(align_module, "_align", lambda *args: seen.append(blas_threads()) or real(*args))
    src, tgt, _ = _ladder()
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_threads()
        align(src, tgt, np.full(len(src), 40.0), np.full(len(tgt), 40.0))
        assert seen and all(n == 1 for n in seen[0])
        assert blas_threads() == before
