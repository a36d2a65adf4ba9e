"""A sentence run with rescore=evidence: the scorer trained on the run's own confident pairs demotes planted false
pairs whose numbers disagree below every true pair, the threshold is the median3 cut of its log-odds, the margin
stays in each candidate's evidence, and a default run's candidates are unchanged."""

from __future__ import annotations

import numpy as np
import pytest
from django.urls import reverse

from mining.core.enums import Rescore
from mining.core.evidence_rescore import model_from_dict
from mining.ingest.text import norm_hash
from mining.models import Artefact, ArtefactKind, Corpus, Document, Sentence, SentencePairCandidate
from mining.services.params import ParamsError, SentenceRunParams
from tests.factories.mining import _TableEncoder, inline_sentence_run

pytestmark = pytest.mark.django_db

DIM = 64
EN = "report file folder window server user table page printer screen button letter".split()
FR = "rapport fichier dossier fenêtre serveur utilisateur tableau page imprimante écran bouton lettre".split()
N_TRUE = 120
N_FALSE = 3  # planted: the source's near-copy in the target language, with another number
N_NOISE = 80  # sentences a side with no translation (the false pairs' bell the confident pairs are read against)


def _pair(rng: np.random.Generator, number: int) -> tuple[str, str]:
    a, b = rng.choice(len(EN), 2, replace=False)
    return (
        f"The {EN[a]} and the {EN[b]} hold {number} items today.",
        f"Le {FR[a]} et le {FR[b]} contiennent {number} éléments aujourd'hui.",
    )


def _corpus(
    register_encoder, n_true: int = N_TRUE, n_noise: int = N_NOISE
) -> tuple[Corpus, Artefact, list[tuple[str, str]]]:
    """N_TRUE true pairs (the same number both sides) and N_FALSE false ones: a target as close to its source as a
    translation, but with another number. Returns the corpus, its encoder and the false pairs' texts."""
    rng = np.random.default_rng(7)
    n = n_true + N_FALSE + n_noise
    src = rng.standard_normal((n, DIM)).astype(np.float32)
    tgt = src + 0.5 * rng.standard_normal((n, DIM)).astype(np.float32)
    tgt[n_true + N_FALSE :] = rng.standard_normal((n_noise, DIM))
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    corpus = Corpus.objects.create(name="numbers", languages=["en", "fr"])
    table: dict[str, np.ndarray] = {}
    rows, false = [], []
    docs = {lang: Document.objects.create(corpus=corpus, lang=lang, external_id=f"d-{lang}") for lang in ("en", "fr")}
    for i in range(n):
        s_text, t_text = _pair(rng, 100 + 7 * i)
        if i >= n_true + N_FALSE:
            t_text = _pair(rng, 9000 + i)[1]
        elif i >= n_true:
            t_text = t_text.replace(str(100 + 7 * i), str(5000 + i))
            false.append((s_text, t_text))
        for lang, text, emb in (("en", s_text, src[i]), ("fr", t_text, tgt[i])):
            table[text] = emb
            rows.append(
                Sentence(
                    corpus=corpus,
                    document=docs[lang],
                    lang=lang,
                    position=i,
                    text=text,
                    norm_hash=norm_hash(text),
                    detected_lang=lang,
                )
            )
    Sentence.objects.bulk_create(rows)
    register_encoder("table-numbers", lambda threads=1, **_: _TableEncoder(table))
    return corpus, Artefact.objects.create(kind=ArtefactKind.ENCODER, name="table-numbers", version=1), false


@pytest.fixture
def no_dictionaries(monkeypatch):
    """Runs as on a machine without the FreeDict packages (the test's values do not hang on what is installed)."""
    monkeypatch.setattr("mining.core.evidence_rescore.load_dictionary", lambda *a, **kw: None)


def _rows(run) -> list[tuple[str, str, float, int, dict]]:
    return [
        (c.src.text, c.tgt.text, c.score, c.rank, c.evidence)
        for c in SentencePairCandidate.objects.filter(run=run).select_related("src", "tgt").order_by("rank")
    ]


def test_the_evidence_scorer_demotes_pairs_whose_numbers_disagree(
    register_encoder, no_dictionaries, settings, staff_client
) -> None:
    settings.PCAPP_PRECISION_AFTER_RUN = False
    corpus, encoder, false = _corpus(register_encoder)
    plain = inline_sentence_run(corpus, encoder, filters=False)
    run = inline_sentence_run(corpus, encoder, filters=False, rescore="evidence")

    # on the margin, the false pairs stand among the true ones
    margin_rank = {(s, t): r for s, t, _, r, _ in _rows(plain)}
    assert max(margin_rank[p] for p in false) < N_TRUE
    rows = _rows(run)
    assert len(rows) == len(margin_rank)
    rank = {(s, t): r for s, t, _, r, _ in rows}
    false_ranks = sorted(rank[p] for p in false)
    true_ranks = [r for (s, t), r in rank.items() if (s, t) not in false and s.split()[-3] == t.split()[-3]]
    assert len(true_ranks) == N_TRUE
    # every true pair ranks above every planted false pair
    assert max(true_ranks) < min(false_ranks)

    stats = run.stats["rescore"]
    assert stats["applied"] is True
    assert stats["dictionaries"] == {"en-fr": False, "fr-en": False}
    assert stats["features"][:4] == ["score", "cosine", "numbers_any", "numbers_mismatch"]
    assert "dict_src" not in stats["features"]
    assert stats["threshold_rule"] == "median3"
    assert stats["negatives_kind"] == "next-best neighbour"
    assert stats["positives"] >= 10 and stats["negatives"] == stats["positives"]
    # the stored coefficients give each row's score from its margin, cosine and texts
    model = model_from_dict(stats["model"])
    assert model.coef[model.names.index("numbers_mismatch")] < 0
    # scores are the log-odds, ranks follow them, and the margin stays in the evidence
    scores = [sc for _, _, sc, _, _ in rows]
    assert scores == sorted(scores, reverse=True)
    margins = {(s, t): e["margin"] for s, t, _, _, e in rows}
    assert margins == {(s, t): e["margin"] for s, t, _, _, e in _rows(plain)}
    # the threshold is the median3 cut of the log-odds
    cut = run.stats["default_threshold"]
    assert cut["method"] == "median3"
    counts = sorted(stats["threshold_counts"].values())
    assert cut["n_kept"] == counts[1]
    kept = [(s, t) for s, t, sc, _, _ in rows if sc >= cut["threshold"]]
    assert len(kept) == cut["n_kept"]
    # here all three counts keep the 123 pairs that stand above the 45 untranslated sentences' pairs: three false
    # pairs among 123 make no bell of their own, so they are kept, last
    assert stats["threshold_counts"] == {"same_count": 123, "mixture": 123, "expected_f1": 123}
    assert cut["n_candidates"] == 168
    page = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert (
        f"Re-scored by a scorer trained on this run's {stats['positives']} confident pairs against "
        f"{stats['negatives']} next-best neighbours, no labels, from score, cosine, numbers_any"
    ) in page
    assert "(no FreeDict dictionary for en-fr fr-en installed): scores are its log-odds" in page


def test_a_default_run_is_unchanged_by_the_option(register_encoder, settings) -> None:
    settings.PCAPP_PRECISION_AFTER_RUN = False
    corpus, encoder, _ = _corpus(register_encoder)
    default = inline_sentence_run(corpus, encoder)
    none = inline_sentence_run(corpus, encoder, rescore="none")
    assert "rescore" not in default.stats and "rescore" not in none.stats
    assert default.params["rescore"] == "none"
    assert _rows(default) == _rows(none)
    assert default.stats["default_threshold"] == none.stats["default_threshold"]


def test_the_parameter_round_trips() -> None:
    p = SentenceRunParams.from_dict({"rescore": "evidence"})
    assert p.rescore is Rescore.EVIDENCE
    assert p.to_dict()["rescore"] == "evidence"
    assert SentenceRunParams.from_dict(p.to_dict()) == p
    assert SentenceRunParams.from_dict({}).rescore is Rescore.NONE
    assert p.scale_key("usem3") == "usem3/ratio/k=4/max_score/rescore=evidence"
    assert SentenceRunParams().scale_key("usem3") == "usem3/ratio/k=4/max_score"
    with pytest.raises(ParamsError):
        SentenceRunParams.from_dict({"rescore": "gold"})


def test_too_few_confident_pairs_leave_the_margin_and_say_why(
    register_encoder, no_dictionaries, settings, staff_client
) -> None:
    settings.PCAPP_PRECISION_AFTER_RUN = False
    corpus, encoder, _ = _corpus(register_encoder, n_true=8, n_noise=4)
    plain = inline_sentence_run(corpus, encoder, filters=False)
    run = inline_sentence_run(corpus, encoder, filters=False, rescore="evidence")
    stats = run.stats["rescore"]
    n_mutual = sum(len(e["directions"]) == 2 for _, _, _, _, e in _rows(plain))
    assert n_mutual == 13
    # under 50 mutual pairs, half of them are confident (7): under the scorer's 10
    assert (stats["applied"], stats["positives"], stats["positives_rule"]) == (False, 7, "fallback_share")
    assert stats["reason"] == (
        f"not re-scored: 7 confident pairs and {stats['negatives']} negatives; the scorer needs at least 10 and one; "
        "the margin scores stand"
    )
    assert _rows(run) == _rows(plain)
    assert run.stats["default_threshold"] == plain.stats["default_threshold"]
    page = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "Re-scoring asked for, not re-scored: 7 confident pairs" in page


def test_a_hand_threshold_of_a_rescored_run_is_one_on_the_log_odds(register_encoder, no_dictionaries, settings) -> None:
    from mining.selectors import run_threshold_info

    settings.PCAPP_PRECISION_AFTER_RUN = False
    corpus, encoder, _ = _corpus(register_encoder)
    free = inline_sentence_run(corpus, encoder, filters=False, rescore="evidence")
    hand = inline_sentence_run(corpus, encoder, filters=False, rescore="evidence", threshold=0.0)
    # every candidate is written and re-scored alike; the threshold is read where the kept set is
    assert _rows(hand) == _rows(free)
    assert "default_threshold" not in hand.stats and hand.stats["rescore"]["applied"]
    info = run_threshold_info(hand)
    assert (info.value, info.source) == (0.0, "run")
    assert hand.params["threshold"] == 0.0
