"""Document embeddings over segment offsets, and HiDE training on synthetic document pairs."""

import numpy as np
import pytest
import torch

from mining.core.docmatch import (
    HideConfig,
    HideModel,
    HideValidation,
    Pooling,
    check_offsets,
    sentence_avg,
    train_hide,
)
from mining.core.knn import knn_exact


def test_sentence_avg_matches_a_loop_and_handles_empty_documents():
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(7, 4)).astype(np.float32)
    offsets = np.array([0, 3, 3, 7])
    out = sentence_avg(emb, offsets)
    for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:], strict=True)):
        if a == b:
            assert not out[i].any()
        else:
            ref = emb[a:b].mean(0)
            np.testing.assert_allclose(out[i], ref / np.linalg.norm(ref), rtol=1e-5)


def test_offsets_are_checked():
    with pytest.raises(ValueError):
        check_offsets(np.array([0, 5, 3]), 3)


def _docs(n_docs: int, seed: int, shift: np.ndarray):
    """Target docs are noisy, re-ordered and partly re-split versions of the source docs, in a rotated space."""
    rng = np.random.default_rng(seed)
    src_rows, tgt_rows, so, to = [], [], [0], [0]
    for _ in range(n_docs):
        k = rng.integers(3, 9)
        sents = rng.normal(size=(k, 16))
        src_rows.append(sents)
        t = (sents @ shift) + 0.3 * rng.normal(size=sents.shape)
        tgt_rows.append(t[rng.permutation(k)])
        so.append(so[-1] + k)
        to.append(to[-1] + k)
    norm = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    return norm(np.vstack(src_rows)), np.array(so), norm(np.vstack(tgt_rows)), np.array(to)


@pytest.mark.parametrize("pooling", [Pooling.DNN_POOL, Pooling.POOL_DNN])
def test_hide_learns_to_match_documents_and_round_trips(tmp_path, pooling):
    torch.set_num_threads(1)
    rot = np.linalg.qr(np.random.default_rng(5).normal(size=(16, 16)))[0]
    s, so, t, to = _docs(300, 1, rot)
    # crops=0: these targets shuffle their sentences, so proportional crops would not be parallel; skip=False: the
    # paper's tower (the skip variant has its own test below)
    cfg = HideConfig(
        hidden=(32, 32, 48, 48),
        batch_size=50,
        epochs=30,
        lr=3e-3,
        pooling=pooling.value,
        margin=0.3,
        crops=0,
        skip=False,
    )
    model = train_hide(s, so, t, to, config=cfg, seed=0)
    s2, so2, t2, to2 = _docs(100, 2, rot)
    u, v = model.embed(s2, so2, "src"), model.embed(t2, to2, "tgt")
    _, ids = knn_exact(u, v, 1)
    assert (ids[:, 0] == np.arange(100)).mean() > 0.8
    model.save(tmp_path / "hide.pt")
    again = HideModel.load(tmp_path / "hide.pt")
    np.testing.assert_allclose(again.embed(s2, so2, "src"), u, atol=1e-6)


def test_hide_training_is_seeded():
    rot = np.eye(16)
    s, so, t, to = _docs(40, 3, rot)
    cfg = HideConfig(hidden=(16, 16, 16, 16), batch_size=20, epochs=2)
    a = train_hide(s, so, t, to, config=cfg, seed=7).embed(s, so, "src")
    b = train_hide(s, so, t, to, config=cfg, seed=7).embed(s, so, "src")
    np.testing.assert_array_equal(a, b)


def test_document_crops_are_proportional_row_ranges_inside_each_pair():
    from mining.core.docmatch import document_crops

    src_off, tgt_off = np.array([0, 10, 10, 40]), np.array([0, 20, 25, 31])  # doc 1 is empty on the source side
    s0, s1, t0, t1 = document_crops(src_off, tgt_off, 5, np.random.default_rng(0), min_share=0.2)
    np.testing.assert_array_equal(s0[:3], src_off[:-1])  # the aligned pairs come first, unchanged
    np.testing.assert_array_equal(t1[:3], tgt_off[1:])
    assert len(s0) == 3 + 2 * 5  # no crops of the pair with an empty side
    crop = slice(3, None)
    doc = np.repeat([0, 2], 5)
    assert np.all(s1[crop] > s0[crop]) and np.all(t1[crop] > t0[crop])
    assert np.all(s0[crop] >= src_off[doc]) and np.all(s1[crop] <= src_off[doc + 1])
    assert np.all(t0[crop] >= tgt_off[doc]) and np.all(t1[crop] <= tgt_off[doc + 1])
    # the same share of both sides: start fractions agree to within one row of either document
    fs = (s0[crop] - src_off[doc]) / (src_off[doc + 1] - src_off[doc])
    ft = (t0[crop] - tgt_off[doc]) / (tgt_off[doc + 1] - tgt_off[doc])
    assert np.all(np.abs(fs - ft) <= 1 / 6 + 1e-9)


def test_hide_inference_in_place_matches_the_autograd_forward():
    torch.manual_seed(0)
    # skips on the first layer and around the tower (gate moved off 0): the input must not change
    model = HideModel(8, HideConfig(hidden=(8, 6, 6), skip=True))
    with torch.no_grad():
        model.towers["src"].gate.fill_(0.7)
    x = torch.randn(40, 8)
    keep = x.clone()
    with torch.no_grad():
        fast = model.towers["src"](x)
    slow = model.towers["src"](x)
    torch.testing.assert_close(fast, slow.detach(), rtol=0, atol=0)
    assert torch.equal(x, keep)


def test_sentence_avg_with_trailing_empty_documents():
    emb = np.eye(3, dtype=np.float32)
    out = sentence_avg(emb, np.array([0, 2, 3, 3, 3]))
    np.testing.assert_allclose(out[0], np.array([1, 1, 0]) / np.sqrt(2), atol=1e-6)
    np.testing.assert_allclose(out[1], [0, 0, 1])
    np.testing.assert_array_equal(out[2:], 0)
    assert out.dtype == np.float32


@pytest.mark.parametrize("pooling", [Pooling.DNN_POOL, Pooling.POOL_DNN])
def test_hide_with_skip_starts_as_sentence_avg(tmp_path, pooling):
    """Untrained, a skip tower is an isometry (orthonormal P, zero last layer): same cosines as Sentence-Avg, and
    both sides share P. The setting survives a save and load."""
    rng = np.random.default_rng(2)
    emb = rng.normal(size=(30, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    offsets = np.array([0, 4, 9, 9, 20, 30])
    torch.manual_seed(3)
    model = HideModel(8, HideConfig(hidden=(8, 8, 12, 12), pooling=pooling.value, skip=True))
    torch.testing.assert_close(model.towers["src"].skip.weight, model.towers["tgt"].skip.weight, rtol=0, atol=0)
    u, v = model.embed(emb, offsets, "src"), model.embed(emb, offsets, "tgt")
    sa = sentence_avg(emb, offsets)
    np.testing.assert_allclose(u @ v.T, sa @ sa.T, atol=1e-5)
    model.save(tmp_path / "m.pt")
    again = HideModel.load(tmp_path / "m.pt")
    assert again.config.skip
    np.testing.assert_allclose(again.embed(emb, offsets, "src"), u, atol=0)


def test_hide_with_skip_learns_to_match_documents():
    torch.set_num_threads(1)
    rot = np.linalg.qr(np.random.default_rng(5).normal(size=(16, 16)))[0]
    s, so, t, to = _docs(300, 1, rot)
    cfg = HideConfig(hidden=(32, 32, 48, 48), batch_size=50, epochs=30, lr=3e-3, margin=0.3, crops=0, skip=True)
    model = train_hide(s[: so[200]], so[:201], t[: to[200]], to[:201], config=cfg, seed=0)
    test_s, test_t = s[so[200] :], t[to[200] :]
    u = model.embed(test_s, so[200:] - so[200], "src")
    v = model.embed(test_t, to[200:] - to[200], "tgt")
    before = sentence_avg(test_s, so[200:] - so[200]) @ sentence_avg(test_t, to[200:] - to[200]).T
    p1_sa = float(np.mean(before.argmax(1) == np.arange(100)))
    p1 = float(np.mean(knn_exact(u, v, 1)[1][:, 0] == np.arange(100)))
    assert p1 >= 0.9 and p1 > p1_sa + 0.3, (p1, p1_sa)


def test_hide_keeps_the_epoch_best_on_validation():
    torch.set_num_threads(1)
    rot = np.linalg.qr(np.random.default_rng(5).normal(size=(16, 16)))[0]
    s, so, t, to = _docs(300, 1, rot)
    val = HideValidation(*_docs(60, 7, rot))
    cfg = HideConfig(hidden=(32, 32, 48, 48), batch_size=50, epochs=6, lr=3e-3, margin=0.3, crops=0)
    model = train_hide(s, so, t, to, config=cfg, seed=0, validation=val)
    kept = max(range(7), key=lambda e: (model.history[e], model.margins[e], -e))
    assert len(model.history) == len(model.margins) == 7 and model.best_epoch == kept > 0
    assert val.p_at_1(model) == max(model.history)

    # trained on mismatched pairs, every epoch is worse than none: the untrained skip model (Sentence-Avg) is kept
    rng = np.random.default_rng(0)
    noise_t = rng.normal(size=t.shape).astype(np.float32)
    noise_t /= np.linalg.norm(noise_t, axis=1, keepdims=True)
    same = HideValidation(s[: so[60]], so[:61], s[: so[60]] + 0.0, so[:61])  # each document against itself
    model = train_hide(s, so, noise_t, to, config=cfg, seed=0, validation=same)
    assert model.best_epoch == 0 and model.history[0] == 1.0
    u = model.embed(s[: so[60]], so[:61], "src")
    sa = sentence_avg(s[: so[60]], so[:61])
    np.testing.assert_allclose(u @ u.T, sa @ sa.T, atol=1e-5)


class _ScriptedValidation:
    """Validation figures given in advance; records what each epoch's model embeds, to check which one is kept."""

    def __init__(self, p_at_1: list[float], margins: list[float], probe: np.ndarray) -> None:
        self.p, self.m, self.probe, self.seen = list(p_at_1), list(margins), probe, []

    def scores(self, model) -> tuple[float, float]:
        self.seen.append(model.embed(self.probe, np.array([0, len(self.probe)]), "src"))
        return self.p.pop(0), self.m.pop(0)


def test_equal_validation_p_at_1_is_decided_by_the_retrieval_margin():
    torch.set_num_threads(1)
    rot = np.linalg.qr(np.random.default_rng(5).normal(size=(16, 16)))[0]
    s, so, t, to = _docs(100, 1, rot)
    cfg = HideConfig(hidden=(32, 32, 48, 48), batch_size=50, epochs=4, lr=3e-3, margin=0.3, crops=0)
    val = _ScriptedValidation([0.9, 0.95, 0.95, 0.95, 0.9], [0.5, 0.1, 0.3, 0.2, 0.9], s[:5])
    model = train_hide(s, so, t, to, config=cfg, seed=0, validation=val)
    assert model.best_epoch == 2 and model.margins == [0.5, 0.1, 0.3, 0.2, 0.9]
    np.testing.assert_allclose(model.embed(s[:5], np.array([0, 5]), "src"), val.seen[2], atol=1e-6)


def test_validation_margin_is_own_cosine_minus_the_best_other():
    # Sentence-Avg documents (an untrained skip model): doc 0 = e0, doc 1 = e1, doc 2 = (e0 + e1) / |.|
    emb = np.eye(4, dtype=np.float32)[[0, 1, 0, 1]]
    offsets = np.array([0, 1, 2, 4])
    torch.manual_seed(0)
    model = HideModel(4, HideConfig(hidden=(4, 4, 4, 4), skip=True))
    val = HideValidation(emb, offsets, emb.copy(), offsets.copy())
    c = 1 / np.sqrt(2)
    assert val.p_at_1(model) == 1.0
    assert val.margin(model) == pytest.approx(np.mean([1 - c, 1 - c, 1 - c]), abs=1e-5)
