"""The evaluation core: Document BoW trained and scored on held-out documents, each method's run figures computed by
the same function a run calls, the gold figures of a selection, and the re-split noise."""

import numpy as np
import pytest
import torch

from mining.core.doc_evaluation import (
    DOC_BOW,
    RERANK_AVG,
    RUN_P1,
    RUN_PREC,
    SENTENCE_AVG,
    SENTENCE_VOTE,
    Collection,
    Models,
    Noise,
    evaluate_methods,
    format_table,
    resplit,
    selection_figures,
    train_models,
)
from mining.core.docembed import DocumentBow, document_bow_config
from mining.core.docfilter import DEFAULT_THRESHOLDS, document_stats
from mining.core.docmatch import HideConfig
from mining.core.docmethod import DocMethod
from mining.core.docrun import DocMatchConfig, DocumentMatch, match_documents
from tests.mining.core.encoders.helpers import toy_bitext


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _collections(n_docs: int, seed: int, related: bool = False) -> tuple[Collection, Collection]:
    """Toy documents of 3 sentences; with `related`, target sentence vectors are noisy copies of the source's."""
    src, tgt = toy_bitext(3 * n_docs, seed=seed, vocab=300)
    rng = np.random.default_rng(seed)
    s_docs = [src[3 * i : 3 * i + 3] for i in range(n_docs)]
    t_docs = [tgt[3 * i : 3 * i + 3][::-1] for i in range(n_docs)]
    s, t = Collection.from_documents(s_docs, "en"), Collection.from_documents(t_docs, "fr")
    s_emb = _unit(rng.normal(size=(len(s.sentences), 8)))
    if related:
        t_emb = _unit(s_emb.reshape(n_docs, 3, 8)[:, ::-1].reshape(-1, 8) + 0.3 * rng.normal(size=s_emb.shape))
    else:  # random unit sentence vectors: nothing for Sentence-Avg to match on
        t_emb = _unit(rng.normal(size=(len(t.sentences), 8)))
    return Collection(s.lang, s.sentences, s.offsets, s_emb), Collection(t.lang, t.sentences, t.offsets, t_emb)


def test_train_models_trains_document_bow_and_evaluate_methods_scores_it():
    torch.set_num_threads(1)
    tr_s, tr_t = _collections(150, seed=0)
    te_s, te_t = _collections(30, seed=1)
    bow_config = document_bow_config(
        n_buckets=4096, emb_dim=32, hidden=(32, 32, 48, 48), out_dim=32, batch_size=16, epochs=20, lr=3e-3, emb_lr=5e-2
    )
    hide = HideConfig(hidden=(8, 8, 8, 8), epochs=1, batch_size=50)
    models = train_models(tr_s, tr_t, hide_config=hide, bow_config=bow_config, seed=0, rerank=False)
    assert isinstance(models.bow, DocumentBow) and models.rerank_weight == {}
    out = evaluate_methods(te_s, te_t, np.arange(30), models, only=[DOC_BOW, SENTENCE_AVG])
    assert set(out) == {DOC_BOW, SENTENCE_AVG}
    assert out[DOC_BOW][1] > 0.5 > out[SENTENCE_AVG][1]  # random sentence vectors: Sentence-Avg is at chance
    assert not train_models(tr_s, tr_t, hide_config=hide, bow=False, rerank=False).bow


def test_train_models_learns_the_rerank_weight_on_the_validation_pairs():
    torch.set_num_threads(1)
    tr_s, tr_t = _collections(60, seed=2, related=True)
    va_s, va_t = _collections(20, seed=3, related=True)
    hide = HideConfig(hidden=(8, 8, 8, 8), epochs=1, batch_size=20)
    models = train_models(tr_s, tr_t, hide_config=hide, bow=False, validation=(va_s, va_t))
    assert set(models.rerank_weight) == {"hide", "sentence_avg"}
    assert all(0.0 <= w <= 1.0 for w in models.rerank_weight.values())
    assert models.prefilter == DEFAULT_THRESHOLDS


def test_run_figures_are_those_of_the_function_a_run_calls():
    src, tgt = _collections(25, seed=4, related=True)
    gold = np.arange(25)
    out = evaluate_methods(src, tgt, gold, Models(), only=[SENTENCE_AVG, SENTENCE_VOTE, RERANK_AVG])
    stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
    run = match_documents(
        DocMethod.SENTENCE_AVG, src.as_documents(), tgt.as_documents(), DocMatchConfig(), doc_stats=stats
    )
    assert (run.filter_reason == "").all()  # toy words ("s12") hold no numbers: the pre-filter passes them
    hits = sum(int(s) == int(t) for s, t in zip(run.src, run.tgt, strict=True))
    assert out[SENTENCE_AVG][RUN_P1] == pytest.approx(round(hits / 25, 4))
    assert out[SENTENCE_AVG][1] == pytest.approx(float((run.ranked[:, 0] == gold).mean()))
    # votes are right on every pair here, Sentence-Avg on 22 of 25: with the default weight the re-ranker follows its
    # retrieval; with the weight a run learns where votes lead, it follows the votes
    assert out[SENTENCE_VOTE][RUN_P1] == 1.0 and out[RERANK_AVG][RUN_P1] == out[SENTENCE_AVG][RUN_P1] == 0.88
    # (this toy's Sentence-Avg ranks one true target 6th or lower: retrieve 10, so that the votes can re-rank it)
    heavy = evaluate_methods(
        src, tgt, gold, Models(rerank_weight={"sentence_avg": 0.9}), config=DocMatchConfig(top_n=10), only=[RERANK_AVG]
    )
    assert heavy[RERANK_AVG][1] == heavy[RERANK_AVG][RUN_P1] == heavy[RERANK_AVG][RUN_PREC] == 1.0
    table = format_table({"clean": out})
    assert "run P@1" in table and table.splitlines()[3].startswith(SENTENCE_AVG)


def test_selection_figures_count_only_kept_pairs():
    result = DocumentMatch(
        src=np.array([0, 1, 2]),
        tgt=np.array([0, 2, 1]),
        cosine=np.zeros(3),
        score=np.array([3.0, 2.0, 1.0]),
        filter_reason=np.array(["", "", "word_ratio"], dtype=object),
        evidence=[{}, {}, {}],
        ranked=np.array([[0, 1, 2], [2, 1, 0], [1, 0, 2], [-1, -1, -1]]),
    )
    figures = selection_figures(result, {0: 0, 1: 1, 2: 2, 3: 0})  # source 3 gets nothing selected
    # P@1: only source 0 (source 2's pair is filtered); P@3: sources 0-2; precision: 1 of the 2 kept pairs
    assert figures == {"pairs": 4, "p_at_1": 0.25, "p_at_3": 0.75, "precision": 0.5}
    assert selection_figures(result, {}) == {"pairs": 0}


def test_resplit_window_and_the_injected_splitter():
    assert resplit(["a b c d e f g"], "en", Noise.WINDOW, window=3) == ["a b", "c d", "e f", "g"]
    assert resplit(["One. Two", "three."], "en", split=lambda text, lang: text.split(". ")) == ["One", "Two three."]
    with pytest.raises(ValueError, match="needs a sentence splitter"):
        resplit(["x"], "en")
