"""A real Celery worker process on the real broker runs a task whose result lands in the database."""

import pytest

from mining.models import Corpus, Document, Sentence
from mining.tasks import refresh_corpus_stats
from tests.conftest import wait_for


@pytest.mark.worker
def test_worker_runs_task_and_result_lands_in_db(celery_worker_process):
    corpus = Corpus.objects.create(name="worker-test")
    doc = Document.objects.create(corpus=corpus, lang="en", external_id="d1")
    for i, text in enumerate(["One sentence.", "Two sentences."]):
        Sentence.objects.create(corpus=corpus, document=doc, lang="en", position=i, text=text, norm_hash=i)

    refresh_corpus_stats.apply_async(args=[corpus.pk], queue=celery_worker_process)

    assert wait_for(lambda: Corpus.objects.get(pk=corpus.pk).stats.get("sentences") == 2, timeout=60)
    corpus.refresh_from_db()
    assert corpus.stats["documents"] == 1
    assert corpus.languages == ["en"]
