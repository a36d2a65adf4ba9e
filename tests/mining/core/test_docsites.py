"""Matching within sites: groups, shard packing, per-site matching laid out over the whole sides, URL pairs added to
rerank's candidates."""

import numpy as np
import pytest

from mining.core.docembed import Documents
from mining.core.docmethod import DocMethod
from mining.core.docrerank import retrieve, with_pairs
from mining.core.docrun import DocMatchConfig, match_documents
from mining.core.docsites import Group, combine_matches, match_groups, pack_groups, site_groups


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def test_site_groups_keep_sites_both_sides_have():
    groups = site_groups(["a", "b", "a", "", "c"], ["b", "a", "a", "d", ""])
    assert [(g.key, g.src.tolist(), g.tgt.tolist()) for g in groups] == [("a", [0, 2], [1, 2]), ("b", [1], [0])]


def test_pack_groups_balances_shards_and_keeps_a_big_site_alone():
    groups = [Group(k, np.arange(n), np.arange(n)) for k, n in (("big", 10), ("m", 3), ("s1", 2), ("s2", 1), ("s3", 1))]
    shards = pack_groups(groups, max_docs=8)
    assert sorted(sorted(s) for s in shards) == [[0], [1, 4], [2, 3]]  # sizes 20 / 6+2 / 4+2
    assert sorted(i for s in shards for i in s) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="max_docs"):
        pack_groups(groups, 0)


def _sides(rng, n_sites: int, per_site: int, sents: int = 3, d: int = 24, noise: float = 0.35):
    n = n_sites * per_site
    base = rng.normal(size=(n * sents, d)).astype(np.float32)
    perm = rng.permutation(n)
    t_rows = np.concatenate([np.arange(p * sents, p * sents + sents) for p in perm])
    off = np.arange(0, n * sents + 1, sents)
    src = Documents(off, None, _unit(base))
    tgt = Documents(off, None, _unit(base[t_rows] + noise * rng.normal(size=base.shape).astype(np.float32)))
    s_keys = [f"site{i // per_site}" for i in range(n)]
    return src, tgt, s_keys, [s_keys[p] for p in perm], {int(p): j for j, p in enumerate(perm)}


def _rerank(src, tgt, config, urls):
    return match_documents(DocMethod.RERANK, src, tgt, config, urls=urls)


def test_match_groups_matches_inside_each_site_and_maps_back():
    src, tgt, s_keys, t_keys, gold = _sides(np.random.default_rng(0), n_sites=3, per_site=4)
    groups = site_groups(s_keys, t_keys)
    result = match_groups(src, tgt, groups, DocMatchConfig(), _rerank)
    assert sorted(zip(result.src.tolist(), result.tgt.tolist(), strict=True)) == sorted(gold.items())
    assert all(s_keys[s] == t_keys[t] for s, t in zip(result.src, result.tgt, strict=True))
    assert [ev["site"] for ev in result.evidence] == [s_keys[s] for s in result.src]
    assert np.all(np.diff(result.score) <= 0) and result.stats["sites_matched"] == 3
    # the raw ranking names targets of the source's own site only
    ranked = result.ranked[result.ranked >= 0]
    rows = np.nonzero(result.ranked >= 0)[0]
    assert all(s_keys[r] == t_keys[t] for r, t in zip(rows, ranked, strict=True))


def test_combine_matches_of_no_group_is_empty():
    result = combine_matches([], n_src=4, ranked=3)
    assert len(result) == 0 and result.ranked.shape == (4, 3) and (result.ranked == -1).all()


def test_with_pairs_adds_missing_pairs_in_order():
    rng = np.random.default_rng(1)
    u, v = _unit(rng.normal(size=(5, 8))), _unit(rng.normal(size=(6, 8)))
    cands = retrieve(u, v, 1)
    had = set(zip(cands.src.tolist(), cands.tgt.tolist(), strict=True))
    new = [(s, t) for s in range(5) for t in range(6) if (s, t) not in had][:2]
    known = next(iter(had))
    pairs = [*new, known]
    out = with_pairs(cands, np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs]), u, v)
    key = out.src * 6 + out.tgt
    assert np.all(np.diff(key) > 0) and len(out.src) == len(cands.src) + 2
    got = dict(zip(zip(out.src.tolist(), out.tgt.tolist(), strict=True), out.fwd_rank.tolist(), strict=True))
    assert [got[p] for p in new] == [0, 0]
    for s, t in new:
        row = np.flatnonzero((out.src == s) & (out.tgt == t))
        np.testing.assert_allclose(out.sim[row], [float(u[s] @ v[t])], rtol=1e-6)


def test_url_signal_decides_between_two_identical_candidates():
    # two French pages with the same text: only the URL tells which one translates the English page
    rng = np.random.default_rng(2)
    emb = _unit(rng.normal(size=(3, 16)))
    src = Documents(np.array([0, 3]), None, emb)
    tgt = Documents(np.array([0, 3, 6]), None, np.vstack([emb, emb]))
    urls = (["https://s.org/en/b"], ["https://s.org/fr/a", "https://s.org/fr/b"], ["en"], ["fr", "fr"])
    groups = site_groups(["s.org"], ["s.org", "s.org"])
    with_urls = match_groups(src, tgt, groups, DocMatchConfig(k=1), _rerank, urls=urls)
    assert with_urls.tgt.tolist()[0] == 1
    assert with_urls.evidence[0]["url"]["signal"] == 1.0 and with_urls.stats["url_pairs"] == 1
    no_urls = match_groups(src, tgt, groups, DocMatchConfig(k=1, url_weight=0.0), _rerank, urls=urls)
    assert no_urls.evidence[0]["url"]["weight"] == 0.0
