"""The demo: its run's parameters and the address it prints, and load_demo's thinning (used by bench/demo_choice.py)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from mining.management.commands.load_demo import kept
from mining.models import MiningRun
from tests.factories.mining import CorpusFactory


@pytest.mark.django_db
def test_the_demo_run_mines_with_the_distance_margin_and_says_where_to_watch_it():
    CorpusFactory(name="demo-django-ui")
    out = io.StringIO()
    call_command("start_demo_run", "--base-url", "http://127.0.0.1:8000", stdout=out)
    run = MiningRun.objects.get()
    assert run.params["margin"] == "distance" and run.params["k"] == 4 and run.params["threshold"] is None
    assert f"watch it at http://127.0.0.1:8000/runs/{run.pk}/" in out.getvalue()
    again = io.StringIO()
    call_command("start_demo_run", "--base-url", "http://127.0.0.1:8000/", stdout=again)
    assert MiningRun.objects.count() == 1
    assert f"already has a mining run: http://127.0.0.1:8000/runs/{run.pk}/" in again.getvalue()


def test_thinning_keeps_its_share_a_different_part_per_language_and_the_same_each_time():
    keys = [f"\x04message {i}" for i in range(4000)]
    fr = {k for k in keys if kept("fr", k, 0.5)}
    de = {k for k in keys if kept("de", k, 0.5)}
    assert 1900 < len(fr) < 2100 and 1900 < len(de) < 2100
    assert 900 < len(fr & de) < 1100  # independent draws per language
    assert fr == {k for k in keys if kept("fr", k, 0.5)}
    assert all(kept("fr", k, 1.0) for k in keys)


@pytest.mark.django_db
def test_the_demo_brings_a_second_corpus_that_its_precision_estimate_picks_for_decoys():
    from mining.management.commands.load_demo import DECOY_CORPUS, DEMO_CORPUS
    from mining.models import Corpus, RunKind, Sentence
    from mining.selectors.precision import decoy_corpus_for

    out = io.StringIO()
    call_command("load_demo", "--langs", "fr", "--decoys", stdout=out)
    demo, decoys = Corpus.objects.get(name=DEMO_CORPUS), Corpus.objects.get(name=DECOY_CORPUS)
    run = MiningRun.objects.create(
        kind=RunKind.SENTENCE, src_corpus=demo, tgt_corpus=demo, src_lang="en", tgt_lang="fr", params={}
    )
    assert decoy_corpus_for(run) == decoys
    demo_fr = set(Sentence.objects.filter(corpus=demo, lang="fr").values_list("text", flat=True))
    decoy_fr = set(Sentence.objects.filter(corpus=decoys, lang="fr").values_list("text", flat=True))
    # other apps' messages (django.contrib's, DRF's .mo written out as .po, axes'): enough of them that are not on
    # the demo's target side for the estimate (at least half as many decoys as target sentences)
    assert len(decoy_fr - demo_fr) >= 0.5 * len(demo_fr)
    catalogues = set(decoys.documents.values_list("external_id", flat=True))
    assert {"django/contrib/auth/django", "rest_framework/django"} <= catalogues
    assert not catalogues & set(demo.documents.values_list("external_id", flat=True))
    call_command("load_demo", "--langs", "fr", "--decoys", stdout=out)  # idempotent
    assert Corpus.objects.filter(name=DECOY_CORPUS).count() == 1
    assert f"The decoy corpus '{DECOY_CORPUS}' is already there." in out.getvalue()
