"""Corpus pages: list, detail (languages, counts, imports, runs, gold pairs) and deletion with confirmation."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mining.models import Corpus, GoldSentencePair, ImportJob, JobStatus, MiningRun, SentencePairCandidate
from tests.factories.annotation import LabelFactory
from tests.factories.mining import CorpusFactory, MiningRunFactory, SentenceFactory, SentencePairCandidateFactory

pytestmark = pytest.mark.django_db


def _corpus_with_a_run():
    corpus = CorpusFactory(
        name="docs-<en-fr>",
        stats={
            "documents": 2,
            "sentences": 4,
            "gold_sentence_pairs": 1,
            "per_language": {"en": {"documents": 1, "sentences": 2}, "fr": {"documents": 1, "sentences": 2}},
        },
    )
    run = MiningRunFactory(src_corpus=corpus, name="its-run")
    cand = SentencePairCandidateFactory(run=run, src__text="Hello there.", tgt__text="Bonjour.")
    GoldSentencePair.objects.create(corpus=corpus, src=cand.src, tgt=cand.tgt)
    LabelFactory(sentence_pair=cand)
    ImportJob.objects.create(corpus_name=corpus.name, corpus=corpus, format="tsv", status=JobStatus.SUCCEEDED)
    return corpus, run


def test_list_and_detail_show_languages_counts_imports_runs_and_gold_pairs(staff_client):
    corpus, run = _corpus_with_a_run()
    html = staff_client.get(reverse("corpus-list")).content.decode()
    row = html[html.index(f'href="{reverse("corpus-detail", args=[corpus.pk])}"') :]
    assert "docs-&lt;en-fr&gt;</a></td><td>en, fr</td>" in row and "<td>1</td>" in row[: row.index("</tr>")]
    html = staff_client.get(reverse("corpus-detail", args=[corpus.pk])).content.decode()
    languages = html[html.index('id="corpus-languages"') : html.index("</table>", html.index('id="corpus-languages"'))]
    assert "<td>en</td><td>1</td><td>2</td>" in languages and "<th>all</th><th>2</th><th>4</th>" in languages
    assert "en–fr 1" in html and "Hello there." in html and "Bonjour." in html
    assert "its-run" in html and "gettext PO" not in html and "TSV (two columns)" in html


def test_delete_asks_first_then_removes_the_corpus_and_what_was_built_on_it(staff_client):
    corpus, run = _corpus_with_a_run()
    other = MiningRunFactory(name="other corpus run")
    url = reverse("corpus-delete", args=[corpus.pk])
    html = staff_client.get(url).content.decode()
    assert "1 run that reads it, with 1 sentence and 0 document candidates" in html
    response = staff_client.post(url, {})
    assert response["Location"] == url and Corpus.objects.filter(pk=corpus.pk).exists()
    response = staff_client.post(url, {"confirm": "yes"})
    assert response["Location"] == reverse("corpus-list")
    assert not Corpus.objects.filter(pk=corpus.pk).exists()
    assert list(MiningRun.objects.values_list("pk", flat=True)) == [other.pk]
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert ImportJob.objects.get().corpus is None  # the import's record stays, unlinked


def test_a_corpus_in_use_by_a_running_job_is_not_deleted(staff_client):
    corpus = CorpusFactory()
    running = MiningRunFactory(src_corpus=corpus, status=JobStatus.RUNNING)
    SentenceFactory(document__corpus=corpus)
    html = staff_client.get(reverse("corpus-delete", args=[corpus.pk])).content.decode()
    assert f"run {running.pk} (running) is still pending or running" in html and "confirm-delete" not in html
    staff_client.post(reverse("corpus-delete", args=[corpus.pk]), {"confirm": "yes"})
    assert Corpus.objects.filter(pk=corpus.pk).exists()
