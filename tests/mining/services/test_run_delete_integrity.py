"""run_delete and corpus_delete remove a run's rows in bulk (labels and campaign items of its candidates first) and
leave other runs alone; the statement triggers that replace the per-row foreign keys from labels and campaign items
onto sentence-pair candidates still refuse anything that would leave a label pointing nowhere."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse

from annotation.models import Campaign, CampaignItem, Label
from mining.models import Corpus, JobStatus, MiningRun, SentencePairCandidate
from mining.services.corpora import corpus_delete
from mining.services.runs import run_delete
from tests.factories.annotation import LabelFactory
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db

TABLE = SentencePairCandidate._meta.db_table


def _reviewed(run: MiningRun) -> tuple[SentencePairCandidate, CampaignItem]:
    """A staff label on the run's best candidate and a campaign item (with its label) on the second."""
    best, second = SentencePairCandidate.objects.filter(run=run).order_by("rank")[:2]
    LabelFactory(sentence_pair=best)
    campaign = Campaign.objects.create(name=f"c{run.pk}")
    campaign.runs.add(run)
    item = CampaignItem.objects.create(campaign=campaign, run=run, position=0, sentence_pair=second)
    LabelFactory(sentence_pair=second, campaign=campaign, item=item, mode="campaign")
    return best, item


def _check_now() -> None:
    """Run the deferred checks queued so far (the test's transaction never commits), then defer again."""
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cur.execute("SET CONSTRAINTS ALL DEFERRED")


def test_run_delete_removes_the_runs_rows_and_what_refers_to_them_only() -> None:
    run, other = make_run(5, status=JobStatus.SUCCEEDED), make_run(3, status=JobStatus.SUCCEEDED)
    _reviewed(run)
    kept_label, kept_item = _reviewed(other)

    counts = run_delete(run=run)

    assert counts["candidates"] == 5 and counts["miningrun"] == 1
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert not Label.objects.filter(sentence_pair__run_id=run.pk).exists()
    assert not CampaignItem.objects.filter(run_id=run.pk).exists()
    assert SentencePairCandidate.objects.filter(run=other).count() == 3
    assert Label.objects.filter(sentence_pair__run=other).count() == 2
    assert CampaignItem.objects.filter(pk=kept_item.pk).exists()


def test_corpus_delete_removes_the_candidates_of_its_runs_and_their_labels() -> None:
    run, other = make_run(4, status=JobStatus.SUCCEEDED), make_run(2, status=JobStatus.SUCCEEDED)
    _reviewed(run)
    corpus_delete(corpus=Corpus.objects.get(pk=run.src_corpus_id))
    assert not MiningRun.objects.filter(pk=run.pk).exists()
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert not Label.objects.filter(sentence_pair__isnull=False).exclude(sentence_pair__run=other).exists()
    assert SentencePairCandidate.objects.filter(run=other).count() == 2


def test_a_failed_delete_leaves_everything_in_place(monkeypatch) -> None:
    run = make_run(3, status=JobStatus.SUCCEEDED)
    _reviewed(run)

    def broken(*args, **kwargs):
        raise RuntimeError("disk gone")

    monkeypatch.setattr(MiningRun.objects, "filter", broken)
    with pytest.raises(RuntimeError, match="disk gone"):
        run_delete(run=run)
    monkeypatch.undo()
    assert SentencePairCandidate.objects.filter(run=run).count() == 3
    assert Label.objects.filter(sentence_pair__run=run).count() == 2


def test_a_raw_delete_of_a_labelled_candidate_is_refused_at_commit() -> None:
    run = make_run(3, status=JobStatus.SUCCEEDED)
    best, item = _reviewed(run)
    _check_now()
    for pk in (best.pk, item.sentence_pair_id):
        with pytest.raises(IntegrityError, match=f"candidate {pk} was deleted but a label or campaign item still"):
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(f"DELETE FROM {TABLE} WHERE id = %s", [pk])
                _check_now()
    with transaction.atomic(), connection.cursor() as cur:  # the candidate first, its label later: as the FK allowed
        cur.execute(f"DELETE FROM {TABLE} WHERE id = %s", [best.pk])
        cur.execute("DELETE FROM annotation_label WHERE sentence_pair_id = %s", [best.pk])
        _check_now()
    with pytest.raises(IntegrityError, match="truncated while labels"):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"TRUNCATE {TABLE} CASCADE")
    with pytest.raises(IntegrityError, match="its id cannot change"):
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"UPDATE {TABLE} SET id = id + 1000000 WHERE id = %s", [item.sentence_pair_id])
    with transaction.atomic(), connection.cursor() as cur:  # an unreferenced candidate goes
        cur.execute(f"DELETE FROM {TABLE} WHERE run_id = %s AND id <> %s", [run.pk, item.sentence_pair_id])
        _check_now()
    assert list(SentencePairCandidate.objects.filter(run=run).values_list("pk", flat=True)) == [item.sentence_pair_id]


def test_a_label_or_item_on_a_missing_candidate_is_refused_at_commit() -> None:
    run = make_run(1, status=JobStatus.SUCCEEDED)
    missing = SentencePairCandidate.objects.get(run=run).pk + 1000
    campaign = Campaign.objects.create(name="c")
    with pytest.raises(IntegrityError, match=f"refers to sentence-pair candidate {missing}, which does not exist"):
        with transaction.atomic():
            LabelFactory(sentence_pair_id=missing)
            _check_now()
    with pytest.raises(IntegrityError, match="which does not exist"):
        with transaction.atomic():
            CampaignItem.objects.create(campaign=campaign, position=0, sentence_pair_id=missing)
            _check_now()
    with transaction.atomic():  # created and deleted again before commit: nothing left to check
        label = LabelFactory(sentence_pair_id=missing)
        label.delete()
        _check_now()


def test_the_admin_deletes_through_run_delete_and_refuses_a_running_run(admin_client) -> None:
    run, running = make_run(3, status=JobStatus.SUCCEEDED), make_run(2, status=JobStatus.RUNNING)
    _reviewed(run)
    url = reverse("admin:mining_miningrun_delete", args=[running.pk])
    page = admin_client.get(url).content.decode()
    assert "cancel it before deleting it" in page
    admin_client.post(url, {"post": "yes"})
    assert SentencePairCandidate.objects.filter(run=running).count() == 2

    url = reverse("admin:mining_miningrun_delete", args=[run.pk])
    assert "3 sentence-pair candidates" in admin_client.get(url).content.decode()
    admin_client.post(url, {"post": "yes"})
    assert not MiningRun.objects.filter(pk=run.pk).exists()
    assert not SentencePairCandidate.objects.filter(run_id=run.pk).exists()
    assert not Label.objects.filter(sentence_pair__run_id=run.pk).exists()

    bulk = [make_run(2, status=JobStatus.SUCCEEDED).pk for _ in range(2)]
    changelist = reverse("admin:mining_miningrun_changelist")
    admin_client.post(changelist, {"action": "delete_selected", "_selected_action": bulk, "post": "yes"})
    assert not SentencePairCandidate.objects.filter(run_id__in=bulk).exists()
    assert SentencePairCandidate.objects.filter(run=running).count() == 2
