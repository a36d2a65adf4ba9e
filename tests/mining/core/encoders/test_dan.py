"""The DAN dual encoder: features, architecture, seeded training, hard negatives, checkpoints, fine-tuning."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from mining.core.encoders import UnsupportedLanguage, get_encoder
from mining.core.encoders.dan import DanConfig, DanEncoder, Side, build_model, load_checkpoint
from mining.core.encoders.dan_finetune import FineTuneConfig, fine_tune_dan, split_validation, validation_score
from mining.core.encoders.dan_train import mine_hard_negatives, train_dan
from mining.core.encoders.tokenize import FeatureHasher, HashedBatch, tokenize
from tests.mining.core.encoders.helpers import p_at_1, toy_bitext

SMALL = DanConfig(n_buckets=4096, batch_size=32, epochs=4, hard_epochs=1, hard_negatives=3)
SRC, TGT = toy_bitext(300, seed=0)
TRAIN_S, TRAIN_T, TEST_S, TEST_T = SRC[:200], TGT[:200], SRC[200:], TGT[200:]


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def trained() -> DanEncoder:
    return train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=SMALL, seed=0)


def _weights(enc: DanEncoder) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in enc.model.state_dict().items()}


def _assert_same_weights(a: DanEncoder, b: DanEncoder) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


def test_tokenize_lowercases_and_splits_unicode():
    assert tokenize("Héllo, WÖRLD! l'été 3.5") == ["héllo", ",", "wörld", "!", "l", "'", "été", "3", ".", "5"]
    assert tokenize("日本語です") == ["日", "本", "語", "で", "す"]


def test_hashed_features_unigrams_then_bigrams_and_take():
    hasher = FeatureHasher(1 << 20)
    batch = hasher(["a b c", "", "c b a", "a"])
    np.testing.assert_array_equal(batch.counts, [5, 0, 5, 1])
    abc, cba = batch.ids[0:5], batch.ids[5:10]
    assert sorted(abc[:3]) == sorted(cba[:3])  # same words
    assert not set(abc[3:]) & set(cba[3:])  # bigrams depend on order
    assert batch.ids[10] == abc[0]
    sub = batch.take(np.array([2, 1, 3]))
    np.testing.assert_array_equal(sub.offsets, [0, 5, 5, 6])
    np.testing.assert_array_equal(sub.ids, np.concatenate([cba, [abc[0]]]))
    assert isinstance(sub, HashedBatch) and batch.ids.max() < (1 << 20)


def test_char_ngrams_follow_each_sentences_word_features():
    words = FeatureHasher(1 << 20)
    hasher = FeatureHasher(1 << 20, char_ngrams=(3, 4))
    texts = ["uhrzeigersinn drehen", "", "drehen !", "a 42"]
    plain, batch = words(texts), hasher(texts)
    # "<drehen>" has 6 3-grams and 5 4-grams; "!", "a" and "42" add none; "<uhrzeigersinn>" has 13 + 12.
    np.testing.assert_array_equal(batch.counts, plain.counts + [25 + 11, 0, 11, 0])
    for i in range(len(texts)):
        row = batch.ids[batch.offsets[i] : batch.offsets[i + 1]]
        np.testing.assert_array_equal(row[: plain.counts[i]], plain.ids[plain.offsets[i] : plain.offsets[i + 1]])
    drehen = hasher.subword_ids("drehen")
    np.testing.assert_array_equal(batch.ids[batch.offsets[2] + 3 : batch.offsets[3]], drehen)
    np.testing.assert_array_equal(batch.ids[batch.offsets[1] - 11 : batch.offsets[1]], drehen)
    # An inflected form shares most n-grams; a word never hashes like the n-gram that spells it.
    assert len(set(drehen) & set(hasher.subword_ids("drehend"))) >= 8
    assert hasher.subword_ids("ab").tolist() and words(["<ab"]).ids[0] not in hasher.subword_ids("ab")
    with pytest.raises(ValueError, match="n-gram"):
        FeatureHasher(64, char_ngrams=(1,))
    with pytest.raises(ValueError, match="char_ngrams"):
        DanConfig(char_ngrams=(3, 1))


def test_checkpoint_fingerprint_names_subwords_and_domain_weight_only_when_set():
    from mining.core.encoders.dan_train import _config_key

    plain = _config_key(DanConfig())
    assert "char_ngrams" not in plain and "domain_weight" not in plain  # older checkpoints still resume
    assert _config_key(DanConfig(char_ngrams=(3, 4)))["char_ngrams"] == (3, 4)  # a subword run never resumes them
    assert _config_key(DanConfig(domain_weight=5))["domain_weight"] == 5


def test_dan_with_char_ngrams_trains_saves_and_loads(tmp_path):
    config = DanConfig(
        n_buckets=4096, emb_dim=16, hidden=(16, 16), out_dim=8, batch_size=4, epochs=1, hard_epochs=0, char_ngrams=(3,)
    )
    src = ["the cat sleeps", "a dog barks", "birds sing", "the sun shines", "rain falls", "wind blows"]
    tgt = [
        "le chat dort",
        "un chien aboie",
        "les oiseaux chantent",
        "le soleil brille",
        "la pluie tombe",
        "le vent souffle",
    ]
    encoder = train_dan(src, tgt, src_lang="en", tgt_lang="fr", config=config, seed=0)
    encoder.save(tmp_path / "dan.pt")
    again = DanEncoder.load(tmp_path / "dan.pt")
    assert again.model.config.char_ngrams == (3,)
    np.testing.assert_array_equal(again.encode(["the cats sleep"], "en"), encoder.encode(["the cats sleep"], "en"))


def test_hashing_is_stable_across_processes():
    code = "from mining.core.encoders.tokenize import FeatureHasher; print(FeatureHasher(1000)(['x y z']).ids.tolist())"
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": seed}
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] == str(FeatureHasher(1000)(["x y z"]).ids.tolist()) + "\n"


def test_default_architecture_and_encode_contract():
    model = build_model(DanConfig(), seed=0)
    widths = [(layer.in_features, layer.out_features) for layer in model.source.layers]
    assert widths == [(320, 320), (320, 320), (320, 500), (500, 500)]
    assert model.source.projection.out_features == 512
    assert model.source.embedding.weight.shape == (2**18, 320)
    assert model.source.embedding.weight.data_ptr() != model.target.embedding.weight.data_ptr()
    enc = DanEncoder(model, "en", "fr")
    out = enc.encode(["Hello world", "", "Un deux trois"], "en")
    assert out.shape == (3, 512) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    with pytest.raises(UnsupportedLanguage):
        enc.encode(["x"], "de")
    with pytest.raises(ValueError, match="must differ"):
        DanEncoder(model, "en", "en_GB")


def test_towers_are_chosen_by_language(trained):
    texts = TEST_S[:5]
    src_side = trained.encode(texts, "en")
    tgt_side = trained.encode(texts, "fr_FR")
    assert trained.side_of("fr") is Side.TARGET
    assert not np.allclose(src_side, tgt_side)


def test_training_beats_chance_on_held_out_pairs(trained):
    untrained = DanEncoder(build_model(SMALL, seed=0), "en", "fr")
    chance = p_at_1(untrained.encode(TEST_S, "en"), untrained.encode(TEST_T, "fr"))
    after = p_at_1(trained.encode(TEST_S, "en"), trained.encode(TEST_T, "fr"))
    assert chance < 0.2
    assert after > 0.7, after


def test_same_seed_same_weights_other_seed_differs(trained):
    seen = []
    again = train_dan(
        TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=SMALL, seed=0, progress=lambda d, t: seen.append((d, t))
    )
    _assert_same_weights(trained, again)
    assert seen[-1] == (6 * 5, 6 * 5) and [d for d, _ in seen] == list(range(1, 31))
    other = train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=SMALL, seed=1, hard_negatives=False)
    assert not torch.equal(other.model.source.projection.weight, trained.model.source.projection.weight)


def test_checkpoint_round_trip_gives_identical_embeddings(trained, tmp_path):
    path = tmp_path / "dan.pt"
    trained.save(path)
    loaded = DanEncoder.load(path)
    for lang, texts in (("en", TEST_S), ("fr", TEST_T)):
        np.testing.assert_array_equal(loaded.encode(texts, lang), trained.encode(texts, lang))
    assert get_encoder("dan", path=str(path)).languages == frozenset({"en", "fr"})
    with pytest.raises(FileNotFoundError):
        DanEncoder.load(tmp_path / "missing.pt")


class _Crash(Exception):
    pass


def test_resume_after_a_crash_ends_with_the_same_weights(trained, tmp_path):
    path = tmp_path / "run.pt"
    config = DanConfig(**{**SMALL.to_dict(), "checkpoint_every": 4})

    def crash_in_stage_two(done: int, total: int) -> None:
        if done == 27:  # stage 1 is 24 steps; the last checkpoint is at step 24 (and after mining)
            raise _Crash

    with pytest.raises(_Crash):
        train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=config, seed=0, checkpoint_path=path,
                  progress=crash_in_stage_two)  # fmt: skip
    saved = load_checkpoint(path)
    assert not saved["finished"] and saved["train_state"]["stage"] == 2 and saved["train_state"]["hard"] is not None
    with pytest.raises(ValueError, match="different training run"):
        train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=config, seed=5, checkpoint_path=path)
    steps = []
    resumed = train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=config, seed=0, checkpoint_path=path,
                        progress=lambda d, t: steps.append(d))  # fmt: skip
    assert steps == list(range(25, 31))
    _assert_same_weights(trained, resumed)
    assert load_checkpoint(path)["finished"]
    np.testing.assert_array_equal(DanEncoder.load(path).encode(TEST_T, "fr"), trained.encode(TEST_T, "fr"))
    finished = train_dan(TRAIN_S, TRAIN_T, src_lang="en", tgt_lang="fr", config=config, seed=0, checkpoint_path=path,
                         progress=lambda d, t: pytest.fail("a finished run must not train again"))  # fmt: skip
    _assert_same_weights(trained, finished)


def test_mined_hard_negatives_are_the_best_non_gold_targets():
    rng = np.random.default_rng(3)
    src = rng.normal(size=(20, 8)).astype(np.float32)
    tgt = rng.normal(size=(30, 8)).astype(np.float32)
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    gold_s = np.array([*range(20), 0, 0])
    gold_t = np.array([*range(20), 5, 29])
    got = mine_hard_negatives(src, tgt, gold_s, gold_t, 4, batch_size=7)
    scores = src @ tgt.T
    for i in range(20):
        excluded = set(gold_t[gold_s == i])
        oracle = [j for j in np.argsort(-scores[i]) if j not in excluded][:4]
        assert got[i].tolist() == oracle
    few = mine_hard_negatives(src, tgt[:3], np.arange(3), np.arange(3), 3)
    assert (few[:3, 2] == -1).all() and (few[3:] >= 0).all()


def test_fine_tune_ranks_bad_targets_lower_without_touching_the_input(trained):
    before = _weights(trained)
    good = list(zip(TEST_S[:10], TEST_T[:10], strict=True))
    # BAD pairs as reviewers see them: near-translations (the GOOD target with its first word wrong), which the
    # encoder scores high. Targets it already scores low give the softmax no gradient, so they would test nothing.
    bad = [(s, " ".join([f"t{(i * 13 + 5) % 60}", *t.split()[1:]])) for i, (s, t) in enumerate(good)]
    replay = list(zip(TRAIN_S, TRAIN_T, strict=True))

    def bad_rank_loss(enc: DanEncoder) -> float:
        """Mean softmax share of the BAD targets against each GOOD pair's own target."""
        u, v = enc.encode([s for s, _ in good], "en"), enc.encode([t for _, t in good], "fr")
        bv = enc.encode([t for _, t in bad], "fr")
        own, other = (u * v).sum(axis=1, keepdims=True), u @ bv.T
        return float(np.exp(20 * (other - own)).sum(axis=1).mean())

    losses = []
    for seed in range(3):  # one draw is noisy on so small a set; the sum over three is not
        config = FineTuneConfig(epochs=3, lr=1e-3, emb_lr=3e-2, validation_share=0.0, seed=seed)
        result = fine_tune_dan(trained, good, bad, replay_pairs=replay, config=config)
        control = fine_tune_dan(trained, good, [], replay_pairs=replay, config=config)
        assert result.best_epoch == 3 and result.validation == () and result.n_hard_negatives == 10
        assert p_at_1(result.encoder.encode(TEST_S, "en"), result.encoder.encode(TEST_T, "fr")) > 0.8
        losses.append((bad_rank_loss(result.encoder), bad_rank_loss(control.encoder)))
        if seed == 0:
            again = fine_tune_dan(trained, good, bad, replay_pairs=replay, config=config)
            _assert_same_weights(result.encoder, again.encoder)
    # The same training without the BAD targets leaves them more competitive against the GOOD pairs.
    assert sum(r for r, _ in losses) < 0.85 * sum(c for _, c in losses)
    for key, value in trained.model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_fine_tune_keeps_the_starting_weights_when_no_epoch_validates_better(trained):
    good = list(zip(TEST_S, TEST_T, strict=True))
    # Positives that are not translations: every epoch of training on them only hurts the validation pairs.
    noise = [(TRAIN_S[i], TRAIN_T[(i + 7) % 200]) for i in range(200)]
    config = FineTuneConfig(epochs=2, lr=1e-2, emb_lr=1e-1, validation_share=0.5, min_validation=5, seed=0)
    result = fine_tune_dan(trained, good, [], replay_pairs=noise, config=config)
    assert result.n_val_positives == 50 and len(result.validation) == 3
    assert result.best_epoch == 0 and max(result.validation[1:]) <= result.validation[0]
    _assert_same_weights(result.encoder, trained)


def test_split_validation_and_score_by_hand(trained):
    tp, vp, th, vh = split_validation(10, 5, 0.2, seed=3, minimum=2)
    assert len(vp) == 2 and len(vh) == 1
    assert sorted([*tp, *vp]) == list(range(10)) and sorted([*th, *vh]) == list(range(5))
    assert split_validation(10, 5, 0.2, seed=3, minimum=3)[1].size == 0  # too few to hold out: all train
    good = list(zip(TEST_S[:20], TEST_T[:20], strict=True))
    swapped = [(s, TEST_T[(i + 1) % 20]) for i, (s, _) in enumerate(good)]
    assert validation_score(trained, good, swapped) > 0.9  # the trained model separates them
    assert validation_score(trained, swapped, good) < 0.1  # and the reverse labelling scores low


def test_batch_masks_keep_other_gold_pairs_out_of_the_negatives(monkeypatch):
    from mining.core.encoders import dan_train

    captured = {}

    def fake_loss(u, v, margin, scale, bidirectional, extra=None, *, exclude=None, extra_exclude=None):
        captured.update(v=v, extra=extra, exclude=exclude, extra_exclude=extra_exclude)
        return u.sum() * 0

    monkeypatch.setattr(dan_train, "additive_margin_softmax_loss", fake_loss)
    # "a" has two gold targets (A1, A2); "b" and "c" share the target B.
    src, tgt = ["a", "a", "b", "c", "d"], ["A1", "A2", "B", "B", "D"]
    corpus = dan_train._Corpus.build(src, tgt, FeatureHasher(64))
    model = build_model(DanConfig(n_buckets=64, emb_dim=8, hidden=(8, 8), out_dim=4), seed=0)
    hard = np.array([[3, -1], [1, 0], [0, 1], [2, 3]])  # per distinct source a, b, c, d; targets A1 A2 B D = 0..3
    dan_train._pair_loss(model, corpus, np.array([0, 2, 3]), hard, DanConfig(n_buckets=64))
    np.testing.assert_array_equal(
        captured["exclude"].numpy(), [[False, False, False], [False, False, True], [False, True, False]]
    )
    # Batch targets A1, B, B: the negatives are A2 and D (A1 and B are in the batch); A2 is gold for row "a".
    assert captured["extra"].shape[0] == 2
    np.testing.assert_array_equal(captured["extra_exclude"].numpy(), [[True, False], [False, False], [False, False]])


def test_domain_pairs_are_repeated_domain_weight_times_and_checked():
    from mining.core.encoders.dan_train import _weigh_domain

    src, tgt = ["a", "b", "c"], ["x", "y", "z"]
    assert _weigh_domain(src, tgt, [True, False, True], 3) == (
        ["a", "c", "a", "c", "a", "b", "c"],
        ["x", "z", "x", "z", "x", "y", "z"],
    )
    assert _weigh_domain(src, tgt, [True, False, True], 1) == (src, tgt)
    with pytest.raises(ValueError, match="one flag per pair"):
        train_dan(src, tgt, src_lang="en", tgt_lang="fr", domain=[True])
    with pytest.raises(ValueError, match="domain_weight"):
        DanConfig(domain_weight=0)
