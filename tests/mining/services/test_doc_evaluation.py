"""doc_evaluation's Document BoW row: trained through `docembed` on whole documents, scored on held-out ones."""

import numpy as np
import torch

from mining.core.docembed import DocumentBow, document_bow_config
from mining.core.docmatch import HideConfig
from mining.services.doc_evaluation import (
    DOC_BOW,
    SENTENCE_AVG,
    Collection,
    bow_defaults,
    evaluate_methods,
    train_models,
)
from tests.mining.core.encoders.helpers import toy_bitext


def _collections(n_docs: int, seed: int) -> tuple[Collection, Collection]:
    src, tgt = toy_bitext(3 * n_docs, seed=seed, vocab=300)
    rng = np.random.default_rng(seed)
    s_docs = [src[3 * i : 3 * i + 3] for i in range(n_docs)]
    t_docs = [tgt[3 * i : 3 * i + 3][::-1] for i in range(n_docs)]

    def emb(n: int) -> np.ndarray:  # random unit sentence vectors: nothing for Sentence-Avg to match on
        x = rng.normal(size=(n, 8))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    s, t = Collection.from_documents(s_docs, "en"), Collection.from_documents(t_docs, "fr")
    return (
        Collection(s.lang, s.sentences, s.offsets, emb(len(s.sentences))),
        Collection(t.lang, t.sentences, t.offsets, emb(len(t.sentences))),
    )


def test_bow_defaults_are_the_unigram_document_bow():
    assert bow_defaults() == document_bow_config() and not bow_defaults().bigrams


def test_train_models_trains_document_bow_and_evaluate_methods_scores_it():
    torch.set_num_threads(1)
    tr_s, tr_t = _collections(150, seed=0)
    te_s, te_t = _collections(30, seed=1)
    bow_config = document_bow_config(
        n_buckets=4096, emb_dim=32, hidden=(32, 32, 48, 48), out_dim=32, batch_size=16, epochs=20, lr=3e-3, emb_lr=5e-2
    )
    models = train_models(
        tr_s, tr_t, hide_config=HideConfig(hidden=(8, 8, 8, 8), epochs=1, batch_size=50), bow_config=bow_config, seed=0
    )
    assert isinstance(models.bow, DocumentBow)
    out = evaluate_methods(te_s, te_t, np.arange(30), models)
    assert out[DOC_BOW][1] > 0.5 > out[SENTENCE_AVG][1]  # random sentence vectors: Sentence-Avg is at chance
    assert not train_models(tr_s, tr_t, hide_config=HideConfig(hidden=(8, 8, 8, 8), epochs=1), bow=False).bow
