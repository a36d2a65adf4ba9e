"""The document-embedding interface: Sentence-Avg and HiDE adapters, Document BoW (unigram DAN) training and files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mining.core.docembed import (
    DocumentBow,
    Documents,
    Hide,
    SentenceAvg,
    Side,
    document_bow_config,
    train_document_bow,
)
from mining.core.docmatch import HideConfig, HideModel, sentence_avg
from mining.core.encoders.dan import DanConfig, DanEncoder, build_model
from mining.core.encoders.dan_train import _config_key
from mining.core.encoders.tokenize import FeatureHasher
from tests.mining.core.encoders.helpers import p_at_1, toy_bitext

TINY = document_bow_config(
    n_buckets=4096, emb_dim=32, hidden=(32, 32, 48, 48), out_dim=32, batch_size=16, epochs=20, lr=3e-3, emb_lr=5e-2
)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _toy_documents(n_docs: int, seed: int) -> tuple[list[str], list[str]]:
    """Documents of 4 toy sentences; the target document holds their translations in a shuffled sentence order."""
    src, tgt = toy_bitext(4 * n_docs, seed=seed, vocab=300)
    order = np.random.default_rng(seed).permutation(4)
    src_docs = [" ".join(src[4 * i : 4 * i + 4]) for i in range(n_docs)]
    tgt_docs = [" ".join(tgt[4 * i + j] for j in order) for i in range(n_docs)]
    return src_docs, tgt_docs


@pytest.fixture(scope="module")
def bow() -> DocumentBow:
    torch.set_num_threads(1)
    s, t = _toy_documents(200, seed=0)
    return train_document_bow(s, t, "en", "fr", TINY, seed=0)


def test_documents_are_validated_and_joined():
    docs = Documents(np.array([0, 2, 2, 3]), sentences=["a b", "c", "d"])
    assert docs.n_docs == 3 and docs.texts() == ["a b c", "", "d"]
    with pytest.raises(ValueError, match="offsets"):
        Documents(np.array([0, 2]), sentences=["a"])
    with pytest.raises(ValueError, match="embedding rows"):
        Documents(np.array([0, 1]), sentences=["a"], emb=np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match="no sentence embeddings"):
        SentenceAvg().embed_documents(docs, Side.SOURCE)


def test_sentence_avg_and_hide_behind_the_interface():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(6, 8)).astype(np.float32)
    offsets = np.array([0, 2, 6])
    docs = Documents(offsets, emb=emb)
    np.testing.assert_array_equal(SentenceAvg().embed_documents(docs, Side.TARGET), sentence_avg(emb, offsets))
    model = HideModel(8, HideConfig(hidden=(8, 8, 12, 12)))
    hide = Hide(model)
    np.testing.assert_array_equal(hide.embed_documents(docs, Side.SOURCE), model.embed(emb, offsets, "src"))
    np.testing.assert_array_equal(hide.embed_documents(docs, Side.TARGET), model.embed(emb, offsets, "tgt"))


def test_unigram_hashing_drops_bigrams_and_the_default_keeps_them():
    assert FeatureHasher(1 << 20)(["a b c"]).counts.tolist() == [5]  # the sentence DAN is unchanged
    uni = FeatureHasher(1 << 20, bigrams=False)(["a b c", "", "c a b"])
    np.testing.assert_array_equal(uni.offsets, [0, 3, 3, 6])
    assert sorted(uni.ids[:3]) == sorted(uni.ids[3:])
    assert DanConfig().bigrams and not document_bow_config().bigrams
    assert "bigrams" not in _config_key(DanConfig())  # sentence-DAN checkpoints from before the option still resume
    assert not _config_key(document_bow_config())["bigrams"]


def test_document_bow_ignores_word_order(bow):
    texts = ["s1 s2 s3 s4 s5", "s5 s3 s1 s4 s2"]
    out = bow.embed_texts(texts, Side.SOURCE)
    np.testing.assert_allclose(out[0], out[1], atol=1e-6)
    sentence_dan = DanEncoder(build_model(DanConfig(**{**TINY.to_dict(), "bigrams": True}), seed=0), "en", "fr")
    ordered = sentence_dan.encode(texts, "en")
    assert not np.allclose(ordered[0], ordered[1], atol=1e-4)  # the same net with bigrams does see the order


def test_document_bow_matches_held_out_documents_better_than_chance(bow):
    s, t = _toy_documents(40, seed=1)
    untrained = DocumentBow(build_model(TINY, seed=0), "en", "fr")
    before = p_at_1(untrained.embed_texts(s, Side.SOURCE), untrained.embed_texts(t, Side.TARGET))
    after = p_at_1(bow.embed_texts(s, Side.SOURCE), bow.embed_texts(t, Side.TARGET))
    assert before < 0.2
    assert after > 0.7, after  # chance: 1 in 40


def test_document_bow_embeds_documents_by_side(bow):
    docs = Documents(np.array([0, 2, 2, 3]), sentences=["s1 s2", "s3", "s4 s5"])
    out = bow.embed_documents(docs, Side.SOURCE)
    assert out.shape == (3, 32) and out.dtype == np.float32
    np.testing.assert_allclose(out[0], bow.embed_texts(["s1 s2 s3"], Side.SOURCE)[0], atol=1e-6)
    assert not out[1].any()  # an empty document matches nothing
    np.testing.assert_allclose(np.linalg.norm(out[[0, 2]], axis=1), 1.0, rtol=1e-5)
    assert not np.allclose(out[0], bow.embed_documents(docs, Side.TARGET)[0])


def test_document_bow_save_load_round_trip(bow, tmp_path):
    s, t = _toy_documents(10, seed=2)
    bow.save(tmp_path / "bow.pt")
    again = DocumentBow.load(tmp_path / "bow.pt")
    assert (again.src_lang, again.tgt_lang) == ("en", "fr")
    for side, texts in ((Side.SOURCE, s), (Side.TARGET, t)):
        np.testing.assert_array_equal(again.embed_texts(texts, side), bow.embed_texts(texts, side))
    bow.encoder.save(tmp_path / "dan.pt")  # a plain DAN checkpoint is not a Document BoW
    with pytest.raises(ValueError, match="not a Document BoW"):
        DocumentBow.load(tmp_path / "dan.pt")


def test_training_is_seeded_and_unigram_only_whatever_the_config():
    s, t = _toy_documents(20, seed=3)
    cfg = DanConfig(**{**TINY.to_dict(), "epochs": 1, "bigrams": True})
    a = train_document_bow(s, t, "en", "fr", cfg, seed=5)
    b = train_document_bow(s, t, "en", "fr", cfg, seed=5)
    assert not a.encoder.config.bigrams
    np.testing.assert_array_equal(a.embed_texts(s, Side.SOURCE), b.embed_texts(s, Side.SOURCE))
    with pytest.raises(ValueError, match="unigrams only"):
        DocumentBow(build_model(DanConfig(n_buckets=64, emb_dim=4, hidden=(4,), out_dim=4), 0), "en", "fr")
