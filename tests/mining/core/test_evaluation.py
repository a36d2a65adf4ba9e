"""BUCC-style test building and scoring on hand-made data."""

import numpy as np
import pytest

from mining.core.candidates import Strategy
from mining.core.evaluation import build_bucc, evaluate_mining, gold_p_at_1, near_duplicate_key
from mining.core.knn import knn_both_ways
from mining.core.margin import Margin


def test_near_duplicate_key_ignores_case_punctuation_digits():
    assert near_duplicate_key("Hello, World 42!") == near_duplicate_key("hello world")


def test_build_bucc_hides_gold_and_drops_near_duplicates_and_short_sentences():
    gold = [(f"source sentence number {w} is here", f"phrase source numero {w} est ici") for w in "abcdef"]
    gold.append(("too short", "trop court"))
    src_d = ["a distractor sentence with five words", "Source sentence number A is here!", "x y"]
    tgt_d = ["une phrase distractrice avec cinq mots", "autre phrase distractrice avec cinq mots"]
    bucc = build_bucc(gold, src_d, tgt_d, seed=3)
    assert len(bucc.gold) == 6
    assert len(bucc.src_texts) == 7  # the near-duplicate of a gold sentence and the short one are gone
    assert len(bucc.tgt_texts) == 8
    pairs = {(bucc.src_texts[s], bucc.tgt_texts[t]) for s, t in bucc.gold}
    assert pairs == set(gold[:6])


def _planted(n_gold: int, n_noise: int, d: int = 16, noise: float = 0.3, seed: int = 0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n_gold, d))
    src = np.concatenate([base + noise * rng.normal(size=base.shape), rng.normal(size=(n_noise, d))])
    tgt = np.concatenate([base + noise * rng.normal(size=base.shape), rng.normal(size=(n_noise, d))])
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    gold = np.stack([np.arange(n_gold), np.arange(n_gold)], axis=1)
    return src.astype(np.float32), tgt.astype(np.float32), gold


def test_evaluate_mining_scores_every_configuration_and_finds_planted_pairs():
    src, tgt, gold = _planted(40, 160)
    scores, p1 = evaluate_mining(src, tgt, gold, k=4)
    assert len(scores) == 3 * 4
    assert {(s.margin, s.strategy) for s in scores} == {(m.value, st.value) for m in Margin for st in Strategy}
    # 40 planted pairs among 160 random rows a side: every configuration recovers them (F1 >= 0.9 at its best cut)
    assert min(s.f1 for s in scores) >= 0.9
    assert p1 == 1.0


def test_several_neighbourhood_sizes_share_one_search_and_match_separate_runs():
    src, tgt, gold = _planted(40, 160)
    calls = []

    def counting_knn(a, b, k):
        calls.append(k)
        return knn_both_ways(a, b, k)

    scores, p1 = evaluate_mining(src, tgt, gold, k=(4, 16, 4), knn_fn=counting_knn)
    assert calls == [16] and [s.k for s in scores] == [4] * 12 + [16] * 12
    for size in (4, 16):
        alone, p1_alone = evaluate_mining(src, tgt, gold, k=size)
        assert [s for s in scores if s.k == size] == alone and p1 == p1_alone
    with pytest.raises(ValueError, match="k must be"):
        evaluate_mining(src, tgt, gold, k=(4, 0))


def test_gold_p_at_1_is_zero_for_unrelated_embeddings():
    rng = np.random.default_rng(1)
    src = rng.normal(size=(50, 8)).astype(np.float32)
    tgt = -src  # every gold target is the farthest point
    gold = np.stack([np.arange(50), np.arange(50)], axis=1)
    assert gold_p_at_1(src, tgt, gold) == 0.0


def test_distractors_with_a_known_translation_on_the_other_side_are_dropped():
    gold = [("the first gold sentence is here", "la première phrase d'or est ici")]
    src_d = ["a boilerplate sentence repeated on many pages", "another plain source sentence only"]
    tgt_d = ["une phrase passe-partout répétée sur beaucoup de pages", "une autre phrase cible ordinaire"]
    known = [(src_d[0], tgt_d[0])]
    bucc = build_bucc(gold, src_d, tgt_d, seed=0, known_pairs=known)
    assert "a boilerplate sentence repeated on many pages" not in bucc.src_texts
    assert "une phrase passe-partout répétée sur beaucoup de pages" not in bucc.tgt_texts
    assert len(bucc.src_texts) == 2 and len(bucc.tgt_texts) == 2


def test_fuzzy_matches_agrees_with_a_pairwise_jaccard_oracle():
    from mining.core.evaluation import fuzzy_matches, near_duplicate_key

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]
    queries = [" ".join(rng.choice(words, size=rng.integers(1, 7))) for _ in range(60)] + [""]
    pool = [" ".join(rng.choice(words, size=rng.integers(1, 7))) for _ in range(40)]

    def jaccard(a: str, b: str) -> float:
        sa, sb = set(near_duplicate_key(a).split()), set(near_duplicate_key(b).split())
        return len(sa & sb) / len(sa | sb) if sa | sb else 0.0

    for threshold in (0.3, 0.5, 0.8):
        expected = [any(jaccard(q, p) >= threshold for p in pool) for q in queries]
        assert fuzzy_matches(queries, pool, threshold).tolist() == expected
    assert fuzzy_matches([], pool, 0.5).shape == (0,)


def test_fuzzy_care_drops_near_copies_of_gold_and_distractors_whose_translation_is_on_the_other_side():
    gold = [
        ("HSV: this choice displays the hue in degrees", "TSV : ce choix affiche la teinte en degrés"),
        ("the second gold sentence is right here", "la deuxième phrase d'or est juste ici"),
    ]
    src_d = [
        "This choice displays the hue in degrees and more",  # near-copy of a gold source
        "a plain English distractor about something else",
        "the layer menu holds many useful commands",
    ]
    tgt_d = [
        "une phrase cible ordinaire sur autre chose",
        "le menu calque contient beaucoup de commandes utiles",  # translates src_d[2]
        "une autre phrase cible tout à fait ordinaire",
    ]
    src_shadows = [
        ["ce choix affiche la teinte en degrés et plus"],
        ["un distracteur anglais sur autre chose"],
        ["le menu calque contient beaucoup de commandes utiles"],
    ]
    tgt_shadows = [
        ["an ordinary target sentence about another thing"],
        ["the layer menu holds many useful commands"],
        ["another quite ordinary target sentence"],
    ]
    plain = build_bucc(gold, src_d, tgt_d, seed=0)
    assert len(plain.src_texts) == 5 and len(plain.tgt_texts) == 5
    careful = build_bucc(gold, src_d, tgt_d, seed=0, fuzzy=0.5, src_shadows=src_shadows, tgt_shadows=tgt_shadows)
    assert set(careful.src_texts) == {g[0] for g in gold} | {src_d[1]}
    assert set(careful.tgt_texts) == {g[1] for g in gold} | {tgt_d[0], tgt_d[2]}
    pairs = {(careful.src_texts[s], careful.tgt_texts[t]) for s, t in careful.gold}
    assert pairs == set(gold)
