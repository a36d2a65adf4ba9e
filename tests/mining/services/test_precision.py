"""The precision estimate of a finished sentence run, on a small real corpus (Django's own French catalogues, usem3):
stored in the run's stats at the run's threshold, with decoys from a disjoint corpus or shuffled target sentences;
clear errors and reasons; queued after a run succeeds."""

from __future__ import annotations

import math
from pathlib import Path

import django
import numpy as np
import polib
import pytest

from mining.core.precision import PLAN_DISJOINT, PLAN_FALLBACK
from mining.ingest.text import norm_hash
from mining.models import Corpus, Document, JobStatus, RunKind, Sentence, SentencePairCandidate
from mining.selectors import run_threshold
from mining.services import precision as precision_service
from mining.services.precision import STATS_KEY, precision_after_run, run_precision_estimate
from mining.services.runs import run_create
from pcapp.jobs import execute_job

pytestmark = pytest.mark.django_db

FALLBACK_DECOYS = "the target side's sentences with their words shuffled"
OTHER_DECOYS = (
    "fr sentences of corpus 'django-fr-other', minus near-copies of target sentences (cosine >= 0.75), weighted to the "
    "target side's spread of nearest-neighbour similarity"
)

LOCALE = Path(django.__file__).parent


def _catalogue_pairs() -> list[tuple[str, str]]:
    """(en, fr) messages of 3+ words from Django's French catalogues, distinct on both sides."""
    out, seen = [], set()
    for po in sorted(LOCALE.glob("**/fr/LC_MESSAGES/*.po")):
        for entry in polib.pofile(str(po)):
            en, fr = entry.msgid.strip(), entry.msgstr.strip()
            if entry.msgid_plural or "fuzzy" in entry.flags or not fr:
                continue
            if len(en.split()) >= 3 and en.lower() not in seen and fr.lower() not in seen:
                seen.update({en.lower(), fr.lower()})
                out.append((en, fr))
    return out


def _add(corpus: Corpus, lang: str, texts: list[str]) -> None:
    doc = Document.objects.create(corpus=corpus, lang=lang, external_id=f"doc-{lang}")
    Sentence.objects.bulk_create(
        Sentence(corpus=corpus, document=doc, lang=lang, position=i, text=t, norm_hash=norm_hash(t), detected_lang=lang)
        for i, t in enumerate(texts)
    )


@pytest.fixture
def corpora() -> tuple[Corpus, Corpus, set[tuple[str, str]]]:
    """A corpus of 70 translated messages among 50 untranslated ones a side, a disjoint French corpus of 140
    messages for decoys, and the gold pairs."""
    pairs = _catalogue_pairs()
    assert len(pairs) >= 310, len(pairs)
    rng = np.random.default_rng(0)
    pairs = [pairs[i] for i in rng.permutation(len(pairs))]
    gold, en_only, fr_only, decoys = pairs[:70], pairs[70:120], pairs[120:170], pairs[170:310]
    corpus = Corpus.objects.create(name="django-en-fr", languages=["en", "fr"])
    _add(corpus, "en", [p[0] for p in gold + en_only])
    _add(corpus, "fr", [p[1] for p in fr_only + gold])
    other = Corpus.objects.create(name="django-fr-other", languages=["fr"])
    _add(other, "fr", [p[1] for p in decoys])
    return corpus, other, set(gold)


def _run(corpus: Corpus, **params):
    run = run_create(
        kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", params=params, enqueue=False
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


def _measured(run, threshold: float, gold: set) -> tuple[int, float]:
    kept = SentencePairCandidate.objects.filter(run=run, filter_reason="", score__gte=threshold)
    pairs = [(c.src.text, c.tgt.text) for c in kept.select_related("src", "tgt")]
    return len(pairs), sum(p in gold for p in pairs) / len(pairs)


def test_estimate_with_a_decoy_corpus_is_stored_at_the_runs_threshold_and_covers_the_measured_precision(corpora):
    corpus, other, gold = corpora
    run = _run(corpus, threshold=1.0)

    got = run_precision_estimate(run=run, decoy_corpus=other, seed=0)

    run.refresh_from_db()
    assert run.stats[STATS_KEY] == got
    assert got["threshold"] == run_threshold(run) == 1.0 and got["threshold_source"] == "run"
    assert got["method"] == "target-decoy" and got["reason"] == ""
    assert got["decoys"] == OTHER_DECOYS and got["decoy_source"] == "given"
    # 140 other messages drawn, those at cosine >= 0.75 to a target dropped: 117 left for 120 targets
    assert (got["n_targets"], got["n_decoys"]) == (120, 117)
    n_kept, measured = _measured(run, 1.0, gold)
    assert got["n_kept"] == n_kept
    assert got["low"] <= measured <= got["high"], (got, measured)
    # each decoy hit counts its kind weight: the weighted hits, scaled by targets / decoys, are the wrong pairs
    hits, scale, r = got["weighted_hits"], 120 / got["n_decoys"], PLAN_DISJOINT.systematic
    assert got["decoy_hits"] > 0 and hits != got["decoy_hits"]
    assert got["precision"] == pytest.approx(1 - hits * scale / n_kept, abs=1e-4)
    # the interval: counting noise plus the systematic width fitted on the bench, r times the estimated wrong pairs
    assert got["systematic"] == r == 0.04 and got["factor"] == 1.0
    half = 1.959964 * math.sqrt(2 * (hits + 1))
    assert got["low"] == pytest.approx(1 - min(n_kept, (hits + half) * scale + r * hits * scale) / n_kept, abs=2e-4)
    assert got["high"] == pytest.approx(1 - max(0.0, (hits - half) * scale - r * hits * scale) / n_kept, abs=2e-4)


def test_without_a_decoy_corpus_the_other_corpus_of_the_target_language_is_picked(corpora):
    corpus, other, _gold = corpora
    run = _run(corpus, threshold=1.0)
    given = run_precision_estimate(run=run, decoy_corpus=other, seed=0)

    got = run_precision_estimate(run=run, seed=0)

    assert got["decoy_source"] == "picked" and given["decoy_source"] == "given"
    assert got["decoys"] == OTHER_DECOYS
    drop = {"decoy_source", "seconds"}
    assert {k: v for k, v in got.items() if k not in drop} == {k: v for k, v in given.items() if k not in drop}


def test_fallback_decoys_when_no_other_corpus_holds_the_target_language(corpora):
    corpus, other, _gold = corpora
    other.languages = ["de"]  # no longer a French corpus: nothing to pick
    other.save()
    run = _run(corpus, threshold=1.0)

    got = run_precision_estimate(run=run, seed=0)

    assert got["decoy_source"] == "fallback"
    assert got["decoys"] == FALLBACK_DECOYS and got["systematic"] == PLAN_FALLBACK.systematic == 0.8
    assert got["n_decoys"] == 120 and got["precision"] is not None
    assert got["low"] <= got["precision"] <= got["high"]


def test_too_few_kept_pairs_give_a_reason_not_a_number(corpora):
    corpus, other, _gold = corpora
    run = _run(corpus, threshold=5.0)  # nothing scores that high
    got = run_precision_estimate(run=run, decoy_corpus=other)
    assert got["precision"] is None and got["reason"] == "0 pairs kept at the threshold; an estimate needs at least 30"


def test_bad_requests_are_refused_with_the_reason(corpora):
    corpus, _other, _gold = corpora
    run = _run(corpus, threshold=1.0)
    with pytest.raises(ValueError, match="is a side of run"):
        run_precision_estimate(run=run, decoy_corpus=corpus)
    run.status = JobStatus.RUNNING
    with pytest.raises(ValueError, match="once it has succeeded"):
        run_precision_estimate(run=run)


def test_a_succeeded_sentence_run_queues_its_estimate(settings, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr(precision_service, "send_precision_task", lambda run_id: sent.append(run_id))
    corpus = Corpus.objects.create(name="c", languages=["en", "fr"])
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    doc = run_create(kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    settings.PCAPP_PRECISION_AFTER_RUN = True
    with django_capture_on_commit_callbacks(execute=True):
        precision_after_run(run)
        precision_after_run(doc)
    settings.PCAPP_PRECISION_AFTER_RUN = False
    with django_capture_on_commit_callbacks(execute=True):
        precision_after_run(run)
    assert sent == [run.pk]


def test_the_command_prints_the_estimate_and_refuses_unknown_names(corpora):
    from io import StringIO

    from django.core.management import CommandError, call_command

    corpus, other, _gold = corpora
    run = _run(corpus, threshold=1.0)
    out = StringIO()
    call_command("estimate_precision", str(run.pk), "django-fr-other", stdout=out)
    got = run.__class__.objects.get(pk=run.pk).stats[STATS_KEY]
    assert out.getvalue().startswith(f"Run {run.pk}: precision {100 * got['precision']:.1f} %")
    assert OTHER_DECOYS in out.getvalue()
    with pytest.raises(CommandError, match="no corpus 'nope'"):
        call_command("estimate_precision", str(run.pk), "nope")
    with pytest.raises(CommandError, match="no run 999999"):
        call_command("estimate_precision", "999999")


def test_the_picked_decoy_corpus_is_the_largest_other_one_in_the_target_language(corpora):
    from mining.selectors.precision import decoy_corpus_for

    corpus, other, _gold = corpora
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    assert decoy_corpus_for(run) == other  # the run's own corpus holds French too, but is a side
    bigger = Corpus.objects.create(name="bigger", languages=["fr", "en"])
    _add(bigger, "fr", [f"phrase numéro {i} du grand corpus" for i in range(200)])
    german = Corpus.objects.create(name="german", languages=["de"])
    _add(german, "de", [f"Satz Nummer {i}" for i in range(500)])
    assert decoy_corpus_for(run) == bigger
    bigger.deleting = True
    bigger.save()
    assert decoy_corpus_for(run) == other
    run.tgt_lang = "de"
    assert decoy_corpus_for(run) == german
    run.tgt_lang = "it"
    assert decoy_corpus_for(run) is None


def test_a_rescored_runs_decoy_hits_are_scored_by_the_scorer_its_candidates_were(corpora, monkeypatch):
    from mining.core.evidence_rescore import dictionaries_for, model_from_dict, score_pairs

    corpus, other, _gold = corpora
    run = _run(corpus, rescore="evidence")
    record = run.stats["rescore"]
    assert record["applied"] and record["threshold_rule"] == "median3"
    model = model_from_dict(record["model"])
    # the stored scorer, its length centre and the candidates' margin, cosine and texts give back their scores
    kept = list(SentencePairCandidate.objects.filter(run=run, filter_reason="").select_related("src", "tgt"))
    again = score_pairs(
        model,
        np.array([c.evidence["margin"] for c in kept]),
        np.array([c.cosine for c in kept]),
        [c.src.text for c in kept],
        [c.tgt.text for c in kept],
        length_center=record["length_center"],
        # the words of these pairs only: a pair's dictionary features do not hang on the other texts loaded
        dicts=dictionaries_for("en", "fr", [c.src.text for c in kept] + [c.tgt.text for c in kept])
        if "dict_src" in model.names
        else (None, None),
    )
    assert again == pytest.approx([c.score for c in kept], abs=1e-3)  # the margin is stored to 5 decimals

    scored, estimated = [], {}
    real_score, real_estimate = precision_service.score_pairs, precision_service.estimate_precision
    monkeypatch.setattr(
        precision_service, "score_pairs", lambda *a, **kw: scored.append(real_score(*a, **kw)) or scored[-1]
    )
    monkeypatch.setattr(
        precision_service, "estimate_precision", lambda **kw: estimated.update(kw) or real_estimate(**kw)
    )
    got = run_precision_estimate(run=run, decoy_corpus=other, seed=0)

    assert got["threshold"] == pytest.approx(run_threshold(run), abs=1e-6) and got["threshold_source"] == "default"
    assert run_threshold(run) == run.stats["default_threshold"]["threshold"]
    # the decoy hits' scores are the scorer's log-odds of those pairs (not their margins)
    assert len(scored) == 1 and len(estimated["decoy_scores"]) > 0
    assert set(estimated["decoy_scores"].tolist()) <= set(scored[0].tolist())


def test_a_rescored_run_without_its_dictionaries_says_why_it_has_no_estimate(corpora, monkeypatch):
    from mining.core.dictionaries import find_dictionary

    if find_dictionary("en", "fr") is None or find_dictionary("fr", "en") is None:
        pytest.skip("the FreeDict en-fr dictionaries are not installed: a run is re-scored without them")
    corpus, other, _gold = corpora
    run = _run(corpus, rescore="evidence")
    assert "dict_src" in run.stats["rescore"]["features"]
    monkeypatch.setattr(precision_service, "dictionaries_for", lambda *a, **kw: (None, None))
    got = run_precision_estimate(run=run, decoy_corpus=other, seed=0)
    assert got["precision"] is None and got["low"] is None and got["high"] is None
    assert got["reason"].startswith("no estimate: the run was re-scored with the FreeDict dictionaries")
