"""`docrun.match_documents`, the one place a document method becomes selected pairs: every method on an easy set,
RERANK correcting its retrieval (and saying so per pair), the pre-filter pruning and recording, learning."""

import numpy as np
import pytest

from mining.core.docembed import Documents
from mining.core.docfilter import PrefilterThresholds, document_stats
from mining.core.docmethod import DocMethod
from mining.core.docrun import DocMatchConfig, match_documents


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _easy(n_docs: int = 12, sents: int = 5, d: int = 32, seed: int = 0):
    """Target document perm[i] holds noisy copies of source document i's sentences, reversed."""
    rng = np.random.default_rng(seed)
    s_emb = _unit(rng.normal(size=(n_docs * sents, d)))
    perm = rng.permutation(n_docs)
    inv = np.argsort(perm)
    t_emb = np.concatenate([s_emb[inv[j] * sents : (inv[j] + 1) * sents][::-1] for j in range(n_docs)])
    t_emb = _unit(t_emb + 0.2 * rng.normal(size=t_emb.shape))
    off = np.arange(0, n_docs * sents + 1, sents)
    texts = [f"Sentence {i} of page {i // sents}." for i in range(n_docs * sents)]
    t_texts = [f"Phrase {inv[j // sents] * sents + (sents - 1 - j % sents)}." for j in range(n_docs * sents)]
    return Documents(off, texts, s_emb), Documents(off, t_texts, t_emb), perm


@pytest.mark.parametrize("method", [m for m in DocMethod if not m.needs_model])
def test_every_method_pairs_an_easy_set(method):
    src, tgt, perm = _easy()
    r = match_documents(method, src, tgt, DocMatchConfig(prefilter=None))
    assert sorted(zip(r.src.tolist(), r.tgt.tolist(), strict=True)) == [(i, int(perm[i])) for i in range(12)]
    assert r.ranked[:, 0].tolist() == perm.tolist()
    assert list(r.score) == sorted(r.score, reverse=True)
    assert all(ev["method"] == method.value for ev in r.evidence)
    assert (r.filter_reason == "").all()


def _trap():
    """Source doc 0 (4 orthogonal sentences). Target 0: their copies plus 4 unrelated sentences (Sentence-Avg cosine
    0.71); target 1: one sentence, their sum (cosine 1.0 to the source's mean, 0.5 to each sentence)."""
    e = np.eye(8, dtype=np.float32)
    src = Documents(np.array([0, 4]), None, e[:4])
    t_emb = np.concatenate([e, _unit(e[:4].sum(axis=0, keepdims=True))])
    return src, Documents(np.array([0, 8, 9]), None, t_emb)


def test_rerank_overrules_retrieval_and_its_evidence_says_which_stage_ranked_what():
    src, tgt = _trap()
    avg = match_documents(DocMethod.SENTENCE_AVG, src, tgt, DocMatchConfig())
    assert avg.tgt.tolist() == [1]
    r = match_documents(DocMethod.RERANK, src, tgt, DocMatchConfig(rerank_weight=0.9, top_n=2))
    assert r.tgt.tolist() == [0]
    ev = r.evidence[0]
    assert ev["retrieval"] == {"by": "sentence_avg", "rank": 2, "cosine": pytest.approx(0.70711, abs=1e-4)}
    assert ev["vote"]["rank"] == 1 and ev["vote"]["votes"] == 4
    assert ev["combined"]["rank"] == 1 and ev["combined"]["weight"] == 0.9
    assert r.stats["candidates_retrieved"] == 2 and r.stats["candidates_pruned"] == 0
    assert r.ranked[0, :2].tolist() == [0, 1]
    assert match_documents(DocMethod.RERANK, src, tgt, DocMatchConfig(rerank_weight=0.0)).tgt.tolist() == [1]


def test_rerank_learns_its_weight_from_gold_pairs():
    src, tgt = _trap()
    r = match_documents(
        DocMethod.RERANK, src, tgt, DocMatchConfig(rerank_weight=0.0), learn_from={0: 0}, tune_weight=True
    )
    assert r.tgt.tolist() == [0] and r.stats["rerank_weight"] > 0.0
    assert r.stats["rerank_weight_source"].startswith("learnt on 1 gold pairs")


def _numbered():
    """Two source pages, two target pages; each pair shares its numbers, and the embeddings pair them crosswise
    except that target 0's numbers match source 0."""
    src_texts = ["Set 10 to 20.", "Use 30 and 40.", "Page 1 2 3.", "More 4 5 6."]
    tgt_texts = ["Mettre 10 à 20.", "Utiliser 30 et 40.", "Page 1 2 3.", "Plus 4 5 6."]
    e = np.eye(4, dtype=np.float32)
    src = Documents(np.array([0, 2, 4]), src_texts, e)
    tgt = Documents(np.array([0, 2, 4]), tgt_texts, np.concatenate([e[2:], e[:2]]))  # embeddings cross the pairs
    stats = (document_stats(src_texts, src.offsets), document_stats(tgt_texts, tgt.offsets))
    return src, tgt, stats


def test_prefilter_marks_a_selected_pair_and_records_its_features():
    src, tgt, stats = _numbered()
    cfg = DocMatchConfig(prefilter=PrefilterThresholds(number_overlap=0.5))
    r = match_documents(DocMethod.SENTENCE_AVG, src, tgt, cfg, doc_stats=stats)
    assert sorted(zip(r.src.tolist(), r.tgt.tolist(), strict=True)) == [(0, 1), (1, 0)]  # the embeddings' choice
    assert r.filter_reason.tolist() == ["number_overlap", "number_overlap"]
    assert r.evidence[0]["prefilter"]["number_overlap"] == 0.0
    assert r.stats["prefilter"]["number_overlap"] == 0.5


def test_rerank_prunes_before_voting():
    src, tgt, stats = _numbered()
    cfg = DocMatchConfig(prefilter=PrefilterThresholds(number_overlap=0.5), top_n=2)
    r = match_documents(DocMethod.RERANK, src, tgt, cfg, doc_stats=stats)
    # the crosswise pairs fail the number test and are never scored: only the true pairs are left to select
    assert sorted(zip(r.src.tolist(), r.tgt.tolist(), strict=True)) == [(0, 0), (1, 1)]
    assert r.stats["candidates_retrieved"] == 4 and r.stats["candidates_pruned"] == 2
    assert all(ev["prefilter"]["number_overlap"] == 1.0 for ev in r.evidence)


def test_methods_that_need_a_model_refuse_without_one_and_bad_settings_are_named():
    src, tgt, _ = _easy()
    with pytest.raises(ValueError, match="method 'hide' needs its document model"):
        match_documents(DocMethod.HIDE, src, tgt, DocMatchConfig())
    with pytest.raises(ValueError, match="unknown document method 'magic'"):
        match_documents("magic", src, tgt, DocMatchConfig())
    with pytest.raises(ValueError, match="top_n must be >= 1"):
        DocMatchConfig(top_n=0)
