"""A sentence-transformers model from a local directory: a tiny BERT built inside the test, no network."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch

from mining.core.encoders import clear_cache, get_encoder
from mining.core.encoders.local import LocalModelError, LocalSentenceTransformer

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "bonjour", "le", "monde", "the", "cat"]


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Iterator[Path]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield _build_tiny_model(tmp_path_factory)


def _build_tiny_model(tmp_path_factory) -> Path:
    transformers = pytest.importorskip("transformers")
    st_modules = pytest.importorskip("sentence_transformers.sentence_transformer.modules")
    from sentence_transformers import SentenceTransformer

    root = tmp_path_factory.mktemp("tiny-st")
    hf_dir = root / "hf"
    hf_dir.mkdir()
    (hf_dir / "vocab.txt").write_text("\n".join(WORDS) + "\n")
    config = transformers.BertConfig(
        vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        transformers.BertModel(config).save_pretrained(hf_dir)
    transformers.BertTokenizer(str(hf_dir / "vocab.txt")).save_pretrained(hf_dir)
    word = st_modules.Transformer(str(hf_dir), max_seq_length=32)
    pooling = st_modules.Pooling(16, "mean")
    model_dir = root / "tiny-st-model"
    SentenceTransformer(modules=[word, pooling], device="cpu").save(str(model_dir))
    return model_dir


def test_local_encoder_loads_and_encodes(tiny_model_dir):
    clear_cache()
    enc = get_encoder("local", path=str(tiny_model_dir))
    assert get_encoder("local", path=str(tiny_model_dir)) is enc
    assert enc.dim == 16 and enc.name == "local:tiny-st-model" and enc.languages is None
    texts = ["hello world the cat", "bonjour", "le monde", "hello"]
    out = enc.encode(texts, "en", batch_size=3)
    assert out.shape == (4, 16) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    raw = enc.model.encode(texts, convert_to_numpy=True, batch_size=1)
    np.testing.assert_allclose(out, raw / np.linalg.norm(raw, axis=1, keepdims=True), atol=1e-5)
    assert not np.allclose(out[0], out[1])


def test_local_encoder_languages_option(tiny_model_dir):
    enc = LocalSentenceTransformer(tiny_model_dir, languages=["en", "fr_FR"])
    assert enc.languages == frozenset({"en", "fr"})
    assert enc.encode(["le monde"], "fr").shape == (1, 16)


def test_missing_or_wrong_path_is_a_clear_error(tmp_path):
    with pytest.raises(LocalModelError, match="does not exist.*never downloaded"):
        LocalSentenceTransformer(tmp_path / "LaBSE")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("hi")
    with pytest.raises(LocalModelError, match="not a sentence-transformers model directory"):
        LocalSentenceTransformer(tmp_path / "junk")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "modules.json").write_text("[]")
    with pytest.raises(LocalModelError, match="could not load"):
        LocalSentenceTransformer(tmp_path / "broken")
