"""The DAN and the adapter with bf16 matrix products against their fp32 arithmetic, on real sentences."""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest
import torch

from mining.core import hw
from mining.core.encoders.adapter import AdaptedEncoder, AdapterConfig, AdapterModel
from mining.core.encoders.dan import DanConfig, DanEncoder, Side, batch_tensors, build_model
from mining.core.hw import Compute
from tests.mining.core.encoders.helpers import TableEncoder

polib = pytest.importorskip("polib")

LANGS = ("fr", "de")


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def pairs() -> dict[str, tuple[list[str], list[str]]]:
    """150 seeded (English msgid, translation) one-line pairs per language from Django's installed catalogues."""
    import django

    root = os.path.join(os.path.dirname(django.__file__), "conf", "locale")
    rng = np.random.default_rng(0)
    out = {}
    for lang in LANGS:
        found: set[tuple[str, str]] = set()
        for path in sorted(glob.glob(os.path.join(root, lang, "LC_MESSAGES", "*.po"))):
            for e in polib.pofile(path):
                src, tgt = e.msgid.strip(), e.msgstr.strip()
                if src and tgt and "\n" not in src + tgt:
                    found.add((src, tgt))
        ordered = sorted(found)
        assert len(ordered) >= 150, lang
        picked = [ordered[i] for i in rng.choice(len(ordered), 150, replace=False)]
        out[lang] = ([s for s, _ in picked], [t for _, t in picked])
    return out


@pytest.mark.parametrize("lang", LANGS)
def test_dan_bf16_embeddings_are_the_fp32_ones_to_cosine_0_999(pairs, lang: str) -> None:
    model = build_model(DanConfig(n_buckets=2**14), seed=3)
    fp32 = DanEncoder(model, "en", lang, compute="fp32")
    bf16 = DanEncoder(model, "en", lang, compute=Compute.BF16)
    for texts, code in zip(pairs[lang], ("en", lang), strict=True):
        a, b = fp32.encode(texts, code, batch_size=64), bf16.encode(texts, code, batch_size=64)
        assert a.shape == b.shape == (150, 512) and b.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
        cos = np.sum(a * b, axis=1)
        assert cos.min() >= 0.999, cos.min()
        assert not np.array_equal(a, b)  # really another arithmetic


def test_dan_fp32_path_is_the_tower_itself_and_compute_follows_the_hardware(pairs, monkeypatch) -> None:
    model = build_model(DanConfig(n_buckets=2**12), seed=4)
    texts = pairs["fr"][0][:40]
    enc = DanEncoder(model, "en", "fr", compute="fp32")
    with torch.inference_mode():
        ref = model.tower(Side.SOURCE)(*batch_tensors(enc.config.hasher()(texts))).numpy()
    np.testing.assert_allclose(enc.encode(texts, "en"), ref, rtol=0, atol=1e-6)
    monkeypatch.setattr(hw, "_bf16_supported", lambda: False)
    assert DanEncoder(model, "en", "fr").compute is Compute.FP32
    monkeypatch.setattr(hw, "_bf16_supported", lambda: True)
    assert DanEncoder(model, "en", "fr").compute is Compute.BF16
    with pytest.raises(ValueError, match="compute must be"):
        DanEncoder(model, "en", "fr", compute="int8")


def test_dan_bf16_sees_weights_changed_after_it_was_built(pairs) -> None:
    model = build_model(DanConfig(n_buckets=2**12), seed=5)
    enc = DanEncoder(model, "en", "fr", compute="bf16")
    texts = pairs["fr"][0][:20]
    before = enc.encode(texts, "en")
    with torch.no_grad():
        model.source.projection.weight.mul_(-1.0)
        model.source.projection.bias.mul_(-1.0)
    np.testing.assert_allclose(enc.encode(texts, "en"), -before, atol=1e-6)


def _adapter(seed: int) -> AdapterModel:
    """An untrained adapter whose MLP counts (gate 1, not 0): its output is not just the skip projection."""
    model = AdapterModel(64, AdapterConfig(hidden=(64, 64, 64)), seed=seed)
    with torch.no_grad():
        for tower in model.towers.values():
            tower.gate.fill_(1.0)
    return model


def test_adapter_bf16_transform_is_the_fp32_one_to_cosine_0_999() -> None:
    rng = np.random.default_rng(6)
    emb = rng.standard_normal((300, 64)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    model = _adapter(0)
    for side in ("src", "tgt"):
        a = model.transform(emb, side, batch_size=128)
        b = model.transform(emb, side, batch_size=128, compute=Compute.BF16)
        assert b.dtype == np.float32 and b.shape == (300, 64)
        np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
        cos = np.sum(a * b, axis=1)
        assert cos.min() >= 0.999 and not np.array_equal(a, b)


def test_adapted_encoder_uses_its_compute(pairs, monkeypatch) -> None:
    texts = pairs["de"][0][:50]
    rng = np.random.default_rng(7)
    table = {t: rng.standard_normal(64).astype(np.float32) for t in texts}
    base = TableEncoder("table", table, frozenset({"en", "de"}))
    model = _adapter(1)
    fp32 = AdaptedEncoder(base, model, "en", "de", compute="fp32").encode(texts, "en")
    bf16 = AdaptedEncoder(base, model, "en", "de", compute="bf16").encode(texts, "en")
    np.testing.assert_allclose(fp32, model.transform(base.encode(texts, "en"), "src"), rtol=0, atol=1e-6)
    assert np.sum(fp32 * bf16, axis=1).min() >= 0.999
    monkeypatch.setattr(hw, "_bf16_supported", lambda: False)
    assert AdaptedEncoder(base, model, "en", "de").compute is Compute.FP32
