"""A sentence run on compressed (IVF-PQ) index shards, in this process: it finds the exact run's pairs within the
stated recall with exact cosines, searches its index shards by group, and the default (auto) keeps flat shards
below PCAPP_PQ_MIN_ROWS, so a sub-10M run's answers do not change."""

from __future__ import annotations

import numpy as np
import pytest

from mining.models import RunShard, SentencePairCandidate
from mining.services.params import ParamsError, SentenceRunParams
from mining.services.shards.plan import load_npz, run_dir
from tests.factories.mining import inline_sentence_run as _inline
from tests.factories.mining import synthetic_corpus as _synthetic

# a compressed run may miss this share of the exact run's pairs (the planted pairs of _synthetic; measured 0 to 1 %)
PQ_MISS = 0.05


def _pairs(run) -> dict[tuple[int, int], tuple[float, float]]:
    rows = SentencePairCandidate.objects.filter(run=run).values_list("src_id", "tgt_id", "cosine", "score")
    return {(s, t): (c, m) for s, t, c, m in rows}


def compare_with_exact(pq_run, exact_run) -> float:
    """The share of the exact run's pairs (cosine >= 0.5: the planted ones) the compressed run lists; asserts that
    every pair both list has the exact cosine."""
    got, want = _pairs(pq_run), _pairs(exact_run)
    strong = {p for p, (c, _) in want.items() if c >= 0.5}
    common = got.keys() & want.keys()
    assert common
    assert max(abs(got[p][0] - want[p][0]) for p in common) <= 1e-6  # listed similarities are exact
    return len(strong & got.keys()) / len(strong)


@pytest.mark.django_db
def test_a_compressed_run_finds_the_exact_runs_pairs_with_exact_cosines(settings, register_encoder):
    settings.PCAPP_SHARD_ROWS = 1500
    settings.PCAPP_PQ_GROUPS = 2
    settings.PCAPP_PQ_BYTES = 16
    corpus, encoder = _synthetic(4000, register_encoder, name="pq-inline")
    exact = _inline(corpus, encoder)
    pq = _inline(corpus, encoder, knn="ivf", index="pq")
    assert pq.stats["knn"]["method"] == "ivf-pq" and exact.stats["knn"]["method"] == "exact"
    assert pq.stats["shards"]["search"] == (3 + 3) * 2  # each query shard against each of 2 groups
    assert compare_with_exact(pq, exact) >= 1 - PQ_MISS
    # the backward means are made of exact similarities: where the lists agree, the means agree
    for direction in ("fwd", "bwd"):
        a = load_npz(run_dir(pq.pk) / "search" / f"{direction}-00001.npz")
        b = load_npz(run_dir(exact.pk) / "search" / f"{direction}-00001.npz")
        same = (a["ids"] == b["ids"]).all(axis=1)
        assert same.sum() >= 100  # the planted rows, mostly (random rows' neighbours are noise)
        np.testing.assert_allclose(a["mean"][same], b["mean"][same], atol=1e-6)
        assert (a["mean"] <= b["mean"] + 1e-6).all()
    groups = {r["group"] for r in RunShard.objects.filter(run=pq, stage="search").values_list("result", flat=True)}
    assert groups == {0, 1}


@pytest.mark.django_db
def test_auto_keeps_flat_index_shards_below_the_size_and_pq_needs_ivf(settings, register_encoder):
    settings.PCAPP_SHARD_ROWS = 1000
    corpus, encoder = _synthetic(1200, register_encoder, name="pq-auto")
    flat = _inline(corpus, encoder, knn="ivf")  # index auto, 1,200 sentences a side < PCAPP_PQ_MIN_ROWS
    assert flat.stats["knn"]["method"] == "ivf" and "train" in flat.stats["shards"]
    settings.PCAPP_PQ_MIN_ROWS = 1000
    auto = _inline(corpus, encoder, knn="ivf")
    assert auto.stats["knn"]["method"] == "ivf-pq"
    with pytest.raises(ParamsError, match="set kNN to ivf"):
        SentenceRunParams.from_dict({"index": "pq"})
