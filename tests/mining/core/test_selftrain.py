"""Self-training on a synthetic bilingual corpus: two "languages" related by a known word mapping, a tiny base
encoder that only half knows that mapping, and no labels."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from mining.core.encoders.adapter import AdapterConfig
from mining.core.knn import knn_exact
from mining.core.metrics import precision_at_n
from mining.core.selftrain import SelfTrainConfig, self_train
from mining.core.selftrain_pairs import confident_pairs

DIM = 32


def _corpus(seed: int = 0, vocab: int = 400, n_pairs: int = 600, n_extra: int = 300):
    """Base embeddings of a source side (n_pairs + n_extra sentences) and a target side (n_pairs translations, in
    another order, + n_extra unrelated sentences), and the gold pairs (source row, target row).

    Language B's word j is language A's word mapping[j]. The tiny base encoder embeds a sentence as the normalised
    sum of its word vectors; its B word vectors are the A vectors of their translations put through a fixed linear
    distortion plus noise, so it retrieves translations only partly, and a per-language tower can learn better.
    """
    rng = np.random.default_rng(seed)
    word_a = rng.normal(size=(vocab, DIM))
    mapping = rng.permutation(vocab)  # B word j translates A word mapping[j]
    distortion = np.eye(DIM) + 1.2 * rng.normal(size=(DIM, DIM)) / np.sqrt(DIM)
    word_b = word_a[mapping] @ distortion.T + 0.5 * rng.normal(size=(vocab, DIM))
    inverse = np.argsort(mapping)  # A word i -> its B word

    def sentence(n: int) -> np.ndarray:
        return rng.choice(vocab, size=n, replace=False, p=None)

    def embed(words: list[np.ndarray], table: np.ndarray) -> np.ndarray:
        e = np.stack([table[w].sum(axis=0) for w in words])
        return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)

    src_words = [sentence(int(rng.integers(5, 10))) for _ in range(n_pairs + n_extra)]
    tgt_words = []
    for w in src_words[:n_pairs]:
        t = inverse[w]
        t = t[rng.random(len(t)) > 0.15]  # words dropped in translation
        tgt_words.append(np.concatenate([t, rng.choice(vocab, size=1)]))  # one word added
    tgt_words += [sentence(int(rng.integers(5, 10))) for _ in range(n_extra)]
    order = rng.permutation(len(tgt_words))
    tgt_words = [tgt_words[i] for i in order]
    gold_tgt = np.argsort(order)[:n_pairs]
    return embed(src_words, word_a), embed(tgt_words, word_b), np.arange(n_pairs), gold_tgt


def _p_at_1(src: np.ndarray, tgt: np.ndarray, gold_src: np.ndarray, gold_tgt: np.ndarray) -> float:
    return precision_at_n(knn_exact(src[gold_src], tgt, 1)[1], gold_tgt, 1)


CONFIG = SelfTrainConfig(
    rounds=3,
    k=4,
    adapter=AdapterConfig(hidden=(64, 64), batch_size=32, lr=3e-3, epochs=30, hard_negatives=2, validation=0.1),
)


def test_self_training_lifts_p_at_1_over_the_base_encoder_without_gold_pairs() -> None:
    src, tgt, gold_src, gold_tgt = _corpus()
    seen = []

    def evaluate(s: np.ndarray, t: np.ndarray) -> dict:
        seen.append(_p_at_1(s, t, gold_src, gold_tgt))
        return {"p_at_1": seen[-1]}

    result = self_train(src, tgt, config=CONFIG, evaluate=evaluate, seed=0)

    base = _p_at_1(src, tgt, gold_src, gold_tgt)
    assert 0.3 < base < 0.8  # the base encoder half knows the mapping
    assert result.model is not None and result.best_round >= 1
    after = _p_at_1(result.model.transform(src, "src"), result.model.transform(tgt, "tgt"), gold_src, gold_tgt)
    assert after >= base + 0.1
    assert [r.report["p_at_1"] for r in result.rounds] == seen and seen[0] == base
    first = result.rounds[0]
    assert first.round == 0 and first.best_epoch is None and first.rule == "precision"
    assert all(r.n_pairs >= CONFIG.min_pairs for r in result.rounds)
    assert result.rounds[1].agreement is not None and 0.0 < result.rounds[1].agreement <= 1.0


def test_training_depends_on_the_embeddings_alone() -> None:
    """The same corpus gives the same adapter whatever `evaluate` (the only door for gold pairs) reports."""
    src, tgt, gold_src, gold_tgt = _corpus(seed=1, n_pairs=300, n_extra=100)
    config = SelfTrainConfig(rounds=1, adapter=CONFIG.adapter)
    a = self_train(src, tgt, config=config, seed=0)
    b = self_train(src, tgt, config=config, seed=0, evaluate=lambda s, t: {"gold": 1})
    assert [{**r.to_dict(), "report": {}} for r in a.rounds] == [{**r.to_dict(), "report": {}} for r in b.rounds]
    assert b.rounds[1].report == {"gold": 1} and len(a.rounds) == 2


def test_confident_pairs_are_mutual_best_filtered_and_mostly_true() -> None:
    src, tgt, gold_src, gold_tgt = _corpus(seed=2)
    gold = set(zip(gold_src.tolist(), gold_tgt.tolist(), strict=True))

    pairs = confident_pairs(src, tgt, k=4)
    no_even = confident_pairs(src, tgt, k=4, keep=lambda s, t: s % 2 == 1)

    found = list(zip(pairs.src_idx.tolist(), pairs.tgt_idx.tolist(), strict=True))
    true_share = sum(p in gold for p in found) / len(found)
    assert pairs.rule == "precision" and len(found) >= 50
    assert true_share >= 0.85
    assert abs(pairs.estimated_precision - true_share) < 0.1
    assert len(set(pairs.src_idx.tolist())) == len(found) and len(set(pairs.tgt_idx.tolist())) == len(found)
    assert (no_even.src_idx % 2 == 1).all() and len(no_even.src_idx) > 0


def test_few_mutual_pairs_fall_back_to_the_top_share() -> None:
    src, tgt, _, _ = _corpus(seed=3, n_pairs=30, n_extra=0)
    pairs = confident_pairs(src, tgt, k=4, fallback_share=0.5)
    assert pairs.rule == "fallback_share"
    assert len(pairs.src_idx) == int(np.ceil(pairs.n_mutual / 2))
    assert np.isnan(pairs.estimated_true)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        SelfTrainConfig(rounds=0)
    with pytest.raises(ValueError, match="min_precision must be in"):
        SelfTrainConfig(min_precision=0.0)
    with pytest.raises(ValueError, match="self-training needs 8 a side"):
        self_train(np.eye(4, dtype=np.float32), np.eye(4, dtype=np.float32))


def test_the_kept_round_is_the_last_that_grew_the_mutual_best_set_and_the_next_one_stops() -> None:
    """The label-free rule: a round is kept only when it grows the mutual-best set by min_gain over the round before;
    the first that does not ends the rounds and is not kept (its gold figure drifts either way)."""
    src, tgt, gold_src, gold_tgt = _corpus(seed=4)
    config = SelfTrainConfig(rounds=6, min_gain=0.02, adapter=CONFIG.adapter)

    result = self_train(
        src, tgt, config=config, evaluate=lambda s, t: {"p_at_1": _p_at_1(s, t, gold_src, gold_tgt)}, seed=0
    )

    n = [r.n_mutual for r in result.rounds]
    growth = [(b - a) / a for a, b in zip(n, n[1:], strict=False)]
    assert result.best_round >= 1
    assert all(g >= config.min_gain for g in growth[: result.best_round])
    if len(result.rounds) - 1 > result.best_round:  # stopped by the rule, not by the round count
        assert len(result.rounds) == result.best_round + 2 and growth[-1] < config.min_gain
        assert result.stopped.startswith(f"round {result.best_round + 1} grew the criterion")
    p1 = [r.report["p_at_1"] for r in result.rounds]
    assert p1[result.best_round] >= max(p1) - 0.02 and p1[result.best_round] > p1[0] + 0.1


def _word_corpus(seed: int = 0, vocab: int = 300, n_pairs: int = 400, n_extra: int = 150):
    """As _corpus, with the sentences' texts too: language A's word i is "a<i>x", language B's word j "b<j>y"."""
    rng = np.random.default_rng(seed)
    word_a = rng.normal(size=(vocab, DIM))
    mapping = rng.permutation(vocab)
    distortion = np.eye(DIM) + 1.2 * rng.normal(size=(DIM, DIM)) / np.sqrt(DIM)
    word_b = word_a[mapping] @ distortion.T + 0.5 * rng.normal(size=(vocab, DIM))
    inverse = np.argsort(mapping)
    src_words = [rng.choice(vocab, size=int(rng.integers(5, 10)), replace=False) for _ in range(n_pairs + n_extra)]
    tgt_words = [inverse[w][rng.random(len(w)) > 0.15] for w in src_words[:n_pairs]]
    tgt_words += [rng.choice(vocab, size=int(rng.integers(5, 10)), replace=False) for _ in range(n_extra)]
    order = rng.permutation(len(tgt_words))
    tgt_words = [tgt_words[i] for i in order]

    def embed(words: list[np.ndarray], table: np.ndarray) -> np.ndarray:
        e = np.stack([table[w].sum(axis=0) for w in words])
        return (e / np.linalg.norm(e, axis=1, keepdims=True)).astype(np.float32)

    src_texts = [" ".join(f"a{i}x" for i in w) for w in src_words]
    tgt_texts = [" ".join(f"b{j}y" for j in w) for w in tgt_words]
    return (
        embed(src_words, word_a),
        embed(tgt_words, word_b),
        (src_texts, tgt_texts),
        np.arange(n_pairs),
        np.argsort(order)[:n_pairs],
    )


def test_the_subword_dan_trains_on_the_kept_rounds_pairs_and_joins_only_when_it_grows_the_mutual_set() -> None:
    from mining.core.encoders.dan import DanConfig

    src, tgt, texts, gold_src, gold_tgt = _word_corpus()
    dan = DanConfig(n_buckets=2**12, emb_dim=32, hidden=(32,), out_dim=32, epochs=3, hard_epochs=0, char_ngrams=(3,))
    # min_gain -0.5: every round and the DAN count as growth, so the DAN joins.
    config = SelfTrainConfig(rounds=2, min_gain=-0.5, adapter=CONFIG.adapter, dan=dan, dan_weight=0.4)
    reports = []

    def evaluate(s: np.ndarray, t: np.ndarray) -> dict:
        reports.append((s.shape[1], _p_at_1(s, t, gold_src, gold_tgt)))
        return {"p_at_1": reports[-1][1]}

    result = self_train(src, tgt, config=config, evaluate=evaluate, texts=texts, langs=("aa", "bb"), seed=0)

    assert result.best_round == 2 and result.dan is not None and result.dan_weight == 0.4
    report = result.dan_report
    assert report["kept"] is True and report["pairs"] == result.rounds[2].n_pairs  # the kept round's own pairs
    assert report["n_mutual_before"] == result.rounds[2].n_mutual and report["n_mutual"] > 0
    # The combination: the adapter's 64 dimensions and the DAN's 32, evaluated once after the rounds.
    assert reports[-1][0] == 96 and report["report"] == {"p_at_1": reports[-1][1]}
    emb = result.embed(src, tgt, result.dan.encode(texts[0], "aa"), result.dan.encode(texts[1], "bb"))
    assert emb[0].shape == (len(src), 96)
    np.testing.assert_allclose(np.linalg.norm(emb[0], axis=1), 1.0, atol=1e-5)
    assert _p_at_1(*emb, gold_src, gold_tgt) == pytest.approx(reports[-1][1])
    with pytest.raises(ValueError, match="pass its embeddings"):
        result.embed(src, tgt)
    with pytest.raises(ValueError, match="needs the two sides' texts"):
        self_train(src, tgt, config=config)

    # min_gain 1: no round doubles the mutual-best set, nor does the DAN: it is trained on round 0's pairs, reported,
    # and not kept.
    strict = self_train(
        src, tgt, config=replace(config, min_gain=1.0), texts=texts, langs=("aa", "bb"), seed=0, evaluate=evaluate
    )
    assert strict.best_round == 0 and strict.model is None and strict.dan is None
    assert strict.dan_report["kept"] is False and strict.dan_report["pairs"] == strict.rounds[0].n_pairs
    assert strict.dan_report["n_mutual"] < 2 * strict.rounds[0].n_mutual


def test_null_posteriors_read_a_small_false_bell_that_the_mixture_misses() -> None:
    """Mostly true pairs (a whole collection's mutual-best pairs) whose scores form two bumps above a small false
    bell: the two-Gaussian mixture takes the two bumps for its components and trusts almost nothing; the false bell's
    lower half still counts the false pairs."""
    from mining.core.default_threshold import null_posteriors, true_posteriors

    rng = np.random.default_rng(0)
    false = rng.normal(1.03, 0.03, 1000)
    true = np.r_[rng.normal(1.25, 0.06, 3000), rng.normal(1.4, 0.08, 3000)]
    scores = np.sort(np.concatenate([false, true]))[::-1]
    is_true = np.isin(scores, true)

    def confident(post: np.ndarray) -> int:
        ok = np.flatnonzero(np.cumsum(post) / np.arange(1, len(post) + 1) >= 0.95)
        return int(ok[-1]) + 1 if ok.size else 0

    null, mixture = null_posteriors(scores), true_posteriors(scores)

    assert null.sum() == pytest.approx(6000, rel=0.02)
    assert confident(null) > 6000 and is_true[: confident(null)].mean() >= 0.95
    assert confident(mixture) < 100 and mixture.sum() < 2000
