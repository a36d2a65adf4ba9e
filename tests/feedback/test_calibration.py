"""The feedback loop in the app: labels from a campaign train a calibration model that is applied to a run."""

import pytest

from annotation.services import campaign_create, item_claim, label_submit
from annotation.spec import CampaignSpec
from mining.models import (
    Artefact,
    ArtefactKind,
    JobStatus,
    LanguagePairSetting,
    RunKind,
    SentencePairCandidate,
)
from mining.selectors import scale_key
from mining.services.calibrators import threshold_apply
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from pcapp.roles import reviewers_group
from tests.factories.mining import PAIRS, pairs_corpus


@pytest.mark.django_db
def test_campaign_labels_train_a_calibration_that_is_applied_in_bulk(django_user_model):
    corpus = pairs_corpus("calib")
    # Mine with a sentence side that has distractors too, so there are GOOD and BAD candidates.
    run = run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"k": 3, "filters": False, "strategy": "forward"},
        enqueue=False,
    )
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    gold = {en: fr for en, fr in PAIRS}
    reviewer = django_user_model.objects.create_user("cal", password="pw-cal-1234")
    reviewer.groups.add(reviewers_group())
    campaign = campaign_create(spec=CampaignSpec(name="cal", sample_size=len(PAIRS)), runs=[run], reviewers=[reviewer])
    n = 0
    while True:
        item, _ = item_claim(campaign=campaign, reviewer=reviewer)
        if item is None:
            break
        good = gold.get(item.src.text) == item.tgt.text and n % 4 != 0  # some BAD verdicts for a two-class fit
        label_submit(campaign=campaign, reviewer=reviewer, item_id=item.pk, verdict="GOOD" if good else "BAD")
        n += 1
    # 12 labels are too few: the run fails with a clear message.
    cal = run_create(
        kind=RunKind.CALIBRATE,
        src_lang="en",
        tgt_lang="fr",
        params={"campaign": campaign.pk, "method": "platt"},
        enqueue=False,
    )
    execute_job(run=cal)
    cal.refresh_from_db()
    assert cal.status == JobStatus.FAILED and "needs at least 20" in cal.error
    # Label the same candidates outside the campaign by more reviewers to reach 20+.
    from annotation.services import label_pair

    for k in range(2):
        other = django_user_model.objects.create_user(f"cal{k}", password="pw-cal-1234", is_staff=True)
        for c in SentencePairCandidate.objects.filter(run=run).select_related("src", "tgt"):
            label_pair(
                reviewer=other,
                sentence_pair_id=c.pk,
                verdict="GOOD" if gold.get(c.src.text) == c.tgt.text and c.rank % 3 else "BAD",
            )
    cal = run_create(kind=RunKind.CALIBRATE, src_lang="en", tgt_lang="fr", params={"method": "platt"}, enqueue=False)
    execute_job(run=cal)
    cal.refresh_from_db()
    assert cal.status == JobStatus.SUCCEEDED, cal.error
    artefact = Artefact.objects.get(kind=ArtefactKind.CALIBRATION)
    assert artefact.version == 1 and set(artefact.metrics["cross_validated"]) == {"head", "platt", "isotonic"}
    apply = run_create(
        kind=RunKind.APPLY_CALIBRATION,
        parent=run,
        src_lang="en",
        tgt_lang="fr",
        params={"calibration": artefact.pk},
        enqueue=False,
    )
    execute_job(run=apply)
    apply.refresh_from_db()
    assert apply.status == JobStatus.SUCCEEDED, apply.error
    cands = list(SentencePairCandidate.objects.filter(run=run).order_by("-score"))
    assert all(c.calibration_id == artefact.pk and 0 <= c.confidence <= 1 for c in cands)
    # Platt scaling is monotone in the score.
    assert all(a.confidence >= b.confidence - 1e-9 for a, b in zip(cands, cands[1:], strict=False))
    setting = threshold_apply(
        src_lang="en",
        tgt_lang="fr",
        scale_key=scale_key(run),
        threshold=0.5,
        target_precision=0.95,
        estimated_precision=0.96,
        calibration=artefact,
        user=reviewer,
    )
    assert LanguagePairSetting.objects.get() == setting


@pytest.mark.django_db
def test_calibration_page_threshold_panel_and_apply(staff_client, django_user_model):
    from django.urls import reverse

    from tests.factories.mining import make_run

    run = make_run(10, scores=[2.0 - 0.1 * i for i in range(10)])
    other = django_user_model.objects.create_user("lab", password="pw-lab-1234", is_staff=True)
    for c in SentencePairCandidate.objects.filter(run=run):
        from annotation.services import label_pair

        label_pair(reviewer=other, sentence_pair_id=c.pk, verdict="GOOD" if c.rank <= 6 else "BAD")
    src, tgt = run.src_lang, run.tgt_lang
    page = staff_client.get(reverse("calibration", args=[src, tgt]))
    assert page.status_code == 200 and b"No calibration model yet" in page.content
    panel = staff_client.get(reverse("calibration", args=[src, tgt]) + "?target=0.95", headers={"HX-Request": "true"})
    body = panel.content.decode()
    assert "<html" not in body and 'keeps <strong id="n-kept">6</strong>' in body and "1.5000" in body
    # 6 labels: the interval's lower bound is far below 0.95, so storing it asks for confirmation.
    assert 'id="threshold-caution"' in body
    data = {"threshold": "1.5", "target": "0.95", "estimate": "1.0", "confirm": "on", "scale": scale_key(run)}
    staff_client.post(reverse("calibration-apply", args=[src, tgt]), data)
    assert LanguagePairSetting.objects.get(src_lang=src).threshold == 1.5
    assert Artefact.objects.filter(kind=ArtefactKind.CALIBRATION).count() == 0


@pytest.mark.django_db
def test_calibration_page_is_staff_only(reviewer_client):
    from django.urls import reverse

    assert reviewer_client.get(reverse("calibration", args=["en", "fr"])).status_code == 403


@pytest.mark.django_db
def test_calibration_trains_on_uncertain_labels_that_threshold_estimates_leave_out(django_user_model):
    from annotation.models import CampaignItem, Sampler
    from feedback.services.calibration import labelled_pairs, threshold_labels

    corpus = pairs_corpus("active")
    run = run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"k": 3, "filters": False, "strategy": "forward"},
        enqueue=False,
    )
    execute_job(run=run)
    cands = list(SentencePairCandidate.objects.filter(run=run).order_by("rank"))
    for c in cands:  # as if a calibration had been applied
        SentencePairCandidate.objects.filter(pk=c.pk).update(confidence=1.0 - c.rank / (len(cands) + 1))
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key=scale_key(run), threshold=cands[len(cands) // 2].score
    )
    reviewer = django_user_model.objects.create_user("act", password="pw-act-1234")
    campaign = campaign_create(
        spec=CampaignSpec(name="act", sampler=Sampler.STRATIFIED, bands=2, sample_size=6, n_uncertain=4),
        runs=[run],
        reviewers=[reviewer],
    )
    gold = {en: fr for en, fr in PAIRS}
    while (item := item_claim(campaign=campaign, reviewer=reviewer)[0]) is not None:
        label_submit(
            campaign=campaign,
            reviewer=reviewer,
            item_id=item.pk,
            verdict="GOOD" if gold.get(item.src.text) == item.tgt.text else "BAD",
        )
    drawn_by = dict(CampaignItem.objects.filter(campaign=campaign).values_list("sentence_pair_id", "sampler"))
    data = labelled_pairs(src_lang="en", tgt_lang="fr", campaign_id=campaign.pk)
    assert len(data.labels) == 10 and data.u.shape[0] == 10  # the calibration model trains on every label
    uncertain = [drawn_by[int(c)] == Sampler.UNCERTAIN for c in data.candidate_ids]
    assert sum(uncertain) == 4
    # Uncertain labels weigh as much as an average stratum-weighted label.
    w = data.weights
    assert w[uncertain] == pytest.approx([1.0] * 4)
    assert w[[not x for x in uncertain]].mean() == pytest.approx(1.0)
    estimate = threshold_labels(src_lang="en", tgt_lang="fr")
    assert len(estimate.labels) == 6 and estimate.n_left_out == 4
