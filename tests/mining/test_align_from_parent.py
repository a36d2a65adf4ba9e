"""An alignment run gets its languages from its document run (issue 26 item 2): the form, the API and the service
take the parent (and an encoder) only; a language given that differs from the parent's is refused, naming it; the
"align sentences inside the matched documents" link preselects the parent."""

from __future__ import annotations

import pytest
from django.urls import reverse

from mining.forms import RunStartForm
from mining.models import JobStatus, MiningRun, RunKind
from mining.services.runs import RunStartError, run_create
from tests.factories.mining import CorpusFactory, MiningRunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def doc_run():
    corpus = CorpusFactory(languages=["de", "en", "fr"])
    return MiningRunFactory(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", status=JobStatus.SUCCEEDED, params={}
    )


def _langs(run: MiningRun) -> tuple:
    return (run.src_corpus_id, run.tgt_corpus_id, run.src_lang, run.tgt_lang)


def test_the_link_preselects_the_parent_and_the_form_takes_its_languages(staff_client, doc_run, monkeypatch) -> None:
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    results = staff_client.get(reverse("run-results", args=[doc_run.pk])).content.decode()
    link = f'href="{reverse("run-start")}?kind=align&amp;parent={doc_run.pk}" id="align-link"'
    assert link in results
    page = staff_client.get(reverse("run-start"), {"kind": "align", "parent": doc_run.pk}).content.decode()
    assert f'<option value="{doc_run.pk}" selected>' in page
    assert 'name="src_lang"' not in page and 'name="tgt_lang"' not in page and 'name="doc_threshold"' in page
    # a posted language (a stale page, a crafted post) is not read: the form has no such field
    response = staff_client.post(reverse("run-start"), {"kind": "align", "parent": doc_run.pk, "tgt_lang": "de"})
    run = MiningRun.objects.get(kind=RunKind.ALIGN)
    assert response.status_code == 302 and run.parent == doc_run
    assert _langs(run) == _langs(doc_run) and (run.src_lang, run.tgt_lang) == ("en", "fr")


def test_the_api_takes_the_parent_and_names_a_mismatching_language(staff_client, doc_run, monkeypatch) -> None:
    monkeypatch.setattr("mining.services.runs.send_run_task", lambda run_id: None)
    url = reverse("api-run-list")
    response = staff_client.post(
        url, {"kind": "align", "parent": doc_run.pk, "tgt_lang": "de"}, content_type="application/json"
    )
    message = (
        f"An alignment run aligns its document run's tgt lang: run {doc_run.pk} has 'fr', not 'de' (leave it out)."
    )
    assert (response.status_code, response.json()) == (400, {"tgt_lang": [message]})
    response = staff_client.post(url, {"kind": "align", "parent": doc_run.pk}, content_type="application/json")
    assert response.status_code == 201
    assert (response.json()["src_lang"], response.json()["tgt_lang"]) == ("en", "fr")
    response = staff_client.post(url, {"kind": "align"}, content_type="application/json")
    assert response.json() == {"parent": ["An alignment run needs a finished document run."]}


def test_the_service_takes_the_languages_from_the_parent(doc_run) -> None:
    run = run_create(kind=RunKind.ALIGN, parent=doc_run, enqueue=False)
    assert _langs(run) == _langs(doc_run)
    same = run_create(kind=RunKind.ALIGN, parent=doc_run, src_lang="en", tgt_lang="fr", enqueue=False)
    assert _langs(same) == _langs(doc_run)
    with pytest.raises(RunStartError) as exc:
        run_create(kind=RunKind.ALIGN, parent=doc_run, src_lang="en", tgt_lang="de", enqueue=False)
    assert list(exc.value.errors) == ["tgt_lang"]
    sentence = MiningRunFactory(kind=RunKind.SENTENCE)
    with pytest.raises(RunStartError, match=f"parent: Run {sentence.pk} is not a finished document run"):
        run_create(kind=RunKind.ALIGN, parent=sentence, enqueue=False)


def test_the_form_refuses_a_run_that_is_not_a_finished_document_run(doc_run) -> None:
    pending = MiningRunFactory(kind=RunKind.DOCUMENT, status=JobStatus.RUNNING)
    form = RunStartForm(data={"kind": "align", "parent": pending.pk})
    assert not form.is_valid() and list(form.errors) == ["parent"]
