"""The adapter over a frozen base encoder: starts as the base, learns a correction, keeps its best epoch."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.encoders.adapter import AdaptedEncoder, AdapterConfig, AdapterModel, train_adapter
from mining.core.encoders.base import UnsupportedLanguage
from mining.core.encoders.registry import get_encoder
from mining.core.hw import Compute
from tests.mining.core.encoders.helpers import TableEncoder, p_at_1

SMALL = AdapterConfig(hidden=(32, 32), batch_size=32, lr=3e-3, epochs=8, hard_negatives=3, validation=0.2)


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _skewed_pairs(n: int, seed: int, d: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Base embeddings whose target side is the source partly rotated (the same rotation for every call): the
    translations are there, but the base's cosine ranks them poorly; a linear correction per side recovers them."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    rotation, _ = np.linalg.qr(np.random.default_rng(99).normal(size=(d, d)))
    y = 0.3 * x + x @ rotation + 0.05 * rng.normal(size=(n, d))
    return _unit(x), _unit(y)


def test_untrained_adapter_keeps_the_base_cosines():
    src, tgt = _skewed_pairs(50, 0)
    model = AdapterModel(32, AdapterConfig(hidden=(32, 32)), seed=3)
    u, v = model.transform(src, "src"), model.transform(tgt, "tgt")
    np.testing.assert_allclose(u @ v.T, src @ tgt.T, atol=1e-5)
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0, atol=1e-5)


def test_training_raises_p_at_1_over_the_base_and_records_the_kept_epoch():
    src, tgt = _skewed_pairs(600, 1)
    test_src, test_tgt = _skewed_pairs(200, 2)
    model = train_adapter(src, tgt, config=SMALL, seed=0)
    before = p_at_1(test_src, test_tgt)
    after = p_at_1(model.transform(test_src, "src"), model.transform(test_tgt, "tgt"))
    assert after > before + 0.2, (before, after)
    assert len(model.history) == SMALL.epochs + 1 and model.best_epoch == int(np.argmax(model.history))
    assert model.history[model.best_epoch] > model.history[0]


def test_with_nothing_to_learn_the_base_is_kept():
    rng = np.random.default_rng(4)
    src = _unit(rng.normal(size=(200, 32)))
    model = train_adapter(src, src.copy(), config=AdapterConfig(hidden=(32, 32), lr=0.0, epochs=2), seed=0)
    assert model.best_epoch == 0
    np.testing.assert_allclose(model.transform(src, "src") @ model.transform(src, "tgt").T, src @ src.T, atol=1e-5)


def test_training_is_seeded_and_checks_its_input():
    src, tgt = _skewed_pairs(120, 5)
    config = AdapterConfig(hidden=(32, 32), epochs=2, batch_size=32)
    a = train_adapter(src, tgt, config=config, seed=7).transform(src, "src")
    b = train_adapter(src, tgt, config=config, seed=7).transform(src, "src")
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="same shape"):
        train_adapter(src, tgt[:-1], config=config)
    with pytest.raises(ValueError, match="one text per embedding row"):
        train_adapter(src, tgt, src_texts=["a"], tgt_texts=["b"], config=config)


def test_repeated_texts_are_never_their_own_negatives():
    src, tgt = _skewed_pairs(64, 6)
    # Every target text occurs twice with two sources: excluded from each other's negatives, training still runs.
    texts_t = [f"t{i // 2}" for i in range(64)]
    tgt[1::2] = tgt[0::2]
    model = train_adapter(
        src,
        tgt,
        src_texts=[f"s{i}" for i in range(64)],
        tgt_texts=texts_t,
        config=AdapterConfig(hidden=(32, 32), epochs=1, batch_size=16, hard_negatives=2),
        seed=0,
    )
    assert np.isfinite(model.transform(src, "src")).all()


def test_adapted_encoder_picks_the_tower_by_language_and_round_trips(tmp_path, register_encoder):
    src, tgt = _skewed_pairs(200, 8)
    table = {f"en{i}": src[i] for i in range(200)} | {f"fr{i}": tgt[i] for i in range(200)}
    base = TableEncoder("table-adapter-test", table, None)
    register_encoder("table-adapter-test", lambda threads=1: base)
    model = train_adapter(src, tgt, config=SMALL, seed=0)
    encoder = AdaptedEncoder(base, model, "en", "fr_FR", compute="fp32")  # the training arithmetic, to compare
    en = encoder.encode([f"en{i}" for i in range(200)], "en")
    fr = encoder.encode([f"fr{i}" for i in range(200)], "fr")
    np.testing.assert_allclose(en, model.transform(src, "src"), atol=1e-6)
    assert encoder.languages == frozenset({"en", "fr"}) and encoder.dim == 32
    with pytest.raises(UnsupportedLanguage):
        encoder.encode(["en1"], "de")
    path = tmp_path / "adapted.pt"
    encoder.save(path)
    loaded = get_encoder("adapted", path=path)
    loaded.compute = (
        Compute.FP32
    )  # "auto" is bf16 where the CPU has it (tests/mining/core/encoders/test_bf16_encoders.py)
    np.testing.assert_allclose(loaded.encode([f"fr{i}" for i in range(200)], "fr"), fr, atol=1e-6)
    assert loaded.model.best_epoch == model.best_epoch and loaded.model.history == model.history


def _rotated_pairs(n: int, seed: int, rotation_seed: int, d: int = 32) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    rotation, _ = np.linalg.qr(np.random.default_rng(rotation_seed).normal(size=(d, d)))
    return _unit(x), _unit(0.2 * x + x @ rotation + 0.05 * rng.normal(size=(n, d)))


def test_domain_weight_makes_a_few_in_domain_pairs_count_beside_many_background_pairs():
    # The domain's translations are one rotation of the source, the background's another: with ten background pairs
    # per domain pair, weighting the domain is what lets the adapter learn the domain's.
    dom_src, dom_tgt = _rotated_pairs(80, 10, rotation_seed=1)
    bg_src, bg_tgt = _rotated_pairs(800, 11, rotation_seed=2)
    test_src, test_tgt = _rotated_pairs(200, 12, rotation_seed=1)
    src, tgt = np.concatenate([dom_src, bg_src]), np.concatenate([dom_tgt, bg_tgt])
    domain = np.arange(len(src)) < len(dom_src)
    scores = {}
    for weight in (1, 10):
        config = AdapterConfig(
            hidden=(32, 32), batch_size=32, lr=3e-3, epochs=6, hard_negatives=0, validation=0.1, domain_weight=weight
        )
        model = train_adapter(src, tgt, config=config, domain=domain, seed=0)
        scores[weight] = p_at_1(model.transform(test_src, "src"), model.transform(test_tgt, "tgt"))
    assert scores[10] > scores[1] + 0.1, scores


def test_held_out_pairs_come_from_the_domain_and_domain_is_checked():
    from mining.core.encoders.adapter import _epoch_rows, _validation_split

    domain = np.arange(500) < 100
    train_rows, val_rows = _validation_split(500, AdapterConfig(validation=0.1), 0, domain)
    assert len(val_rows) == 10 and domain[val_rows].all()
    assert sorted(np.concatenate([train_rows, val_rows]).tolist()) == list(range(500))
    rows = _epoch_rows(train_rows, domain, 3)
    assert len(rows) == len(train_rows) + 2 * 90
    assert np.bincount(rows, minlength=500)[train_rows[domain[train_rows]]].min() == 3
    src, tgt = _skewed_pairs(40, 13)
    with pytest.raises(ValueError, match="one flag per pair"):
        train_adapter(src, tgt, config=AdapterConfig(hidden=(32, 32), epochs=1), domain=np.ones(39, dtype=bool))
    with pytest.raises(ValueError, match="domain_weight"):
        train_adapter(src, tgt, config=AdapterConfig(hidden=(32, 32), epochs=1, domain_weight=0))
