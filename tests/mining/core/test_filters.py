"""Pre-filters: each reason fires on a hand-made pair, and the first reason wins."""

import numpy as np

from mining.core.filters import FilterReason, apply_filters, keep_mask, reason_counts, tokenize

GOOD_SRC = "The committee adopted the report without a vote ."
GOOD_TGT = "Le comité a adopté le rapport sans vote ."


def _run(src: list[str], tgt: list[str], **kw: object) -> list[FilterReason | None]:
    return apply_filters(src, tgt, src_lang="en", tgt_lang="fr", **kw).tolist()  # type: ignore[arg-type]


def test_clean_pair_passes() -> None:
    assert _run([GOOD_SRC], [GOOD_TGT]) == [None]


def test_each_reason_fires() -> None:
    src = [
        GOOD_SRC,  # identical
        "Article 12 of the treaty applies here .",
        "Article 12 of the treaty applies here .",  # duplicate of the previous pair
        "Short one .",  # too short on the source side
        " ".join(["word"] * 81),
        "The council met in Geneva on Monday afternoon .",
        "The European Parliament approved the budget today .",
    ]
    tgt = [
        GOOD_SRC,
        "L' article 12 du traité s' applique ici .",
        "L'   article 12 du traité s' applique ici .",  # same after whitespace normalisation
        "Une phrase courte mais assez longue .",
        " ".join(["mot"] * 81),
        "Le conseil s' est réuni à Genève lundi après-midi dans la grande salle des assemblées générales .",
        "The European Parliament a approuvé le budget aujourd'hui .",
    ]
    assert _run(src, tgt) == [
        FilterReason.IDENTICAL,
        None,
        FilterReason.DUPLICATE,
        FilterReason.TOO_SHORT,
        FilterReason.TOO_LONG,
        FilterReason.LENGTH_RATIO,
        FilterReason.TOKEN_OVERLAP,
    ]


def test_wrong_language_and_unknown_detection() -> None:
    got = _run(
        [GOOD_SRC, GOOD_SRC + " Yes .", GOOD_SRC + " No ."],
        [GOOD_TGT, GOOD_TGT + " Oui .", GOOD_TGT + " Non ."],
        src_detected=["en", "de", None],
        tgt_detected=["fr", "fr", "en"],
    )
    assert got == [None, FilterReason.WRONG_LANGUAGE, FilterReason.WRONG_LANGUAGE]
    assert _run([GOOD_SRC], [GOOD_TGT], src_detected=[None], tgt_detected=[None]) == [None]


def test_first_reason_wins() -> None:
    # identical AND too short: identical comes first
    assert _run(["Hi ."], ["Hi ."]) == [FilterReason.IDENTICAL]
    # too short AND length ratio: too short comes first
    assert _run(
        [
            "One two",
        ],
        ["Un deux trois quatre cinq six"],
    ) == [FilterReason.TOO_SHORT]


def test_thresholds_are_parameters() -> None:
    assert _run(["a b c d e"], ["v w x y z"], min_tokens=6) == [FilterReason.TOO_SHORT]
    assert _run(["a b c d e"], ["v w x y z"], max_tokens=4) == [FilterReason.TOO_LONG]
    assert _run(["a b c d e f"], ["v w x"], max_len_ratio=1.5) == [FilterReason.LENGTH_RATIO]
    assert _run(["a b c d e f"], ["v w x"]) == [None]  # ratio exactly 2 is allowed


def test_numbers_do_not_count_as_overlap() -> None:
    assert _run(["Chapter 3 , paragraph 2 , line 7"], ["Kapitel 3 , Absatz 2 , Zeile 7"]) == [None]


def test_tokenize_splits_cjk() -> None:
    assert tokenize("Hello, World!") == ["hello", "world"]
    assert tokenize("我爱你 ok") == ["我", "爱", "你", "ok"]


def test_helpers() -> None:
    reasons = apply_filters([GOOD_SRC, GOOD_SRC], [GOOD_TGT, GOOD_SRC], src_lang="en", tgt_lang="fr")
    np.testing.assert_array_equal(keep_mask(reasons), [True, False])
    counts = reason_counts(reasons)
    assert counts[FilterReason.IDENTICAL] == 1 and sum(counts.values()) == 1
