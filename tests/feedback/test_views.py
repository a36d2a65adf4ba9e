"""The calibration page parses every field through a form: malformed or missing values give a message, never a 500,
and a language pair with no run is a 404."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from mining.models import LanguagePairSetting, MiningRun, RunKind
from mining.selectors import scale_key

pytestmark = pytest.mark.django_db


@pytest.fixture
def pair(db) -> MiningRun:
    return MiningRun.objects.create(kind=RunKind.SENTENCE, src_lang="en", tgt_lang="fr", status="succeeded")


def test_unknown_pair_is_404(staff_client, pair) -> None:
    assert staff_client.get(reverse("calibration", args=["en", "xx"])).status_code == 404
    assert staff_client.post(reverse("calibration-apply", args=["en", "xx"]), {"threshold": "1"}).status_code == 404
    assert staff_client.get(reverse("calibration", args=["en", "fr"])).status_code == 200


def test_a_bad_target_is_reported_and_the_default_shown(staff_client, pair) -> None:
    response = staff_client.get(reverse("calibration", args=["en", "fr"]), {"target": "abc"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "Target precision: Enter a number. Showing 0.95." in response.content.decode()


@pytest.mark.parametrize(
    ("url", "data", "message"),
    [
        ("calibration-apply", {"threshold": "high"}, "threshold: Enter a number."),
        ("calibration-apply", {"threshold": "1.0", "estimate": "7"}, "estimate: Ensure this value is less than"),
        ("calibration-apply", {}, "Give a threshold to store or a run to apply the calibration to."),
        ("calibration-apply", {"run": "999999"}, "run: Select a valid choice."),
        ("calibration-train", {"campaign": "x", "method": "head"}, "campaign: Select a valid choice."),
        ("calibration-train", {"method": "magic"}, "method: Select a valid choice. magic is not one of"),
        ("calibration-fine-tune", {"encoder": "", "eval_corpus": "1"}, "encoder: pick a DAN encoder"),
        ("calibration-fine-tune", {"seed": "-1"}, "seed: Ensure this value is greater than or equal to 0."),
    ],
)
def test_malformed_posts_give_a_message_and_change_nothing(staff_client, pair, url, data, message) -> None:
    runs_before = MiningRun.objects.count()
    response = staff_client.post(reverse(url, args=["en", "fr"]), data)
    assert response.status_code == 302
    assert response["Location"] == reverse("calibration", args=["en", "fr"])
    texts = [str(m) for m in get_messages(response.wsgi_request)]
    assert any(t.startswith(message) for t in texts), texts
    assert MiningRun.objects.count() == runs_before
    assert not LanguagePairSetting.objects.exists()


def test_a_valid_threshold_is_stored(staff_client, pair) -> None:
    response = staff_client.post(
        reverse("calibration-apply", args=["en", "fr"]),
        {"threshold": "1.07", "target": "0.95", "estimate": "0.96", "scale": scale_key(pair)},
    )
    assert response.status_code == 302
    setting = LanguagePairSetting.objects.get(src_lang="en", tgt_lang="fr")
    assert (setting.threshold, setting.target_precision, setting.estimated_precision) == (1.07, 0.95, 0.96)
    assert setting.scale_key == "usem3 v1/ratio/k=4/max_score"


def test_a_threshold_needs_the_scoring_configuration_it_was_found_on(staff_client, pair) -> None:
    """A threshold is a point on one scale: a post without a configuration, or with one no run of the pair has, stores
    nothing and says why."""
    url = reverse("calibration-apply", args=["en", "fr"])
    for scale in ("", "usem3 v1/distance/k=4/max_score"):
        response = staff_client.post(url, {"threshold": "1.07", "target": "0.95", "scale": scale})
        texts = [str(m) for m in get_messages(response.wsgi_request)]
        assert any("is a point on one scoring configuration's scale" in t for t in texts), texts
    assert not LanguagePairSetting.objects.exists()


def _labelled_run(scores_verdicts, **kwargs):
    """A sentence run of en-fr whose candidates carry the given scores, each with a staff label when a verdict is
    given (None: unlabelled)."""
    from annotation.models import Verdict
    from tests.factories.annotation import LabelFactory
    from tests.factories.mining import MiningRunFactory, SentencePairCandidateFactory

    run = MiningRunFactory(**kwargs)
    for i, (score, verdict) in enumerate(scores_verdicts):
        cand = SentencePairCandidateFactory(run=run, score=score, rank=i + 1)
        if verdict is not None:
            LabelFactory(sentence_pair=cand, verdict=Verdict.GOOD if verdict else Verdict.BAD)
    return run


def test_the_yield_is_counted_over_the_runs_the_user_ticks(staff_client) -> None:
    """ "keeps N pairs" used to count every en-fr run's candidates, unrelated corpora and duplicate runs included."""
    a = _labelled_run([(2.0, True), (1.8, True), (1.6, True), (1.0, False), (0.9, False)])
    b = _labelled_run([(1.9, None), (1.7, None), (0.5, None)])
    url = reverse("calibration", args=["en", "fr"])
    html = staff_client.get(url, {"target": "0.9", "runs": [a.pk]}, HTTP_HX_REQUEST="true").content.decode()
    assert '<strong id="chosen-threshold">1.6000</strong>' in html
    assert '<strong id="n-kept">3</strong> pairs' in html
    html = staff_client.get(url, {"target": "0.9", "runs": [a.pk, b.pk]}, HTTP_HX_REQUEST="true").content.decode()
    assert '<strong id="n-kept">5</strong> pairs' in html
    # Without ?runs=, the newest run of the pair (b) is counted and ticked.
    page = staff_client.get(url, {"target": "0.9"}).content.decode()
    assert '<strong id="n-kept">2</strong> pairs' in page
    assert f'name="runs" value="{b.pk}" checked' in page and f'name="runs" value="{a.pk}">' in page


def test_a_weak_threshold_is_flagged_and_storing_it_asks_for_confirmation(staff_client) -> None:
    _labelled_run([(2.0, True), (1.8, True), (1.6, True), (1.0, False), (0.9, False)])
    url = reverse("calibration", args=["en", "fr"])
    html = staff_client.get(url, {"target": "0.95"}).content.decode()
    # 3 GOOD of 3 kept: precision 1.0, but the Wilson lower bound (0.44) is far below 0.95.
    assert 'id="threshold-caution"' in html and "far below the target 0.95" in html
    assert 'name="confirm" value="on" required id="confirm-threshold"' in html
    data = {"threshold": "1.6", "target": "0.95", "estimate": "1.0", "scale": "usem3 v1/ratio/k=4/max_score"}
    response = staff_client.post(reverse("calibration-apply", args=["en", "fr"]), data)
    assert any("tick the confirmation box" in str(m) for m in get_messages(response.wsgi_request))
    assert not LanguagePairSetting.objects.exists()
    staff_client.post(reverse("calibration-apply", args=["en", "fr"]), {**data, "confirm": "on"})
    assert LanguagePairSetting.objects.get().threshold == 1.6


def test_a_model_from_few_labels_or_nearly_constant_is_shown_with_cautions(staff_client, pair) -> None:
    from mining.models import Artefact, ArtefactKind

    reliability = {"confidence": [0.8262, 0.8266, 0.8271], "frequency": [0.7, 0.8, 0.9], "count": [10, 10, 10]}
    Artefact.objects.create(
        kind=ArtefactKind.CALIBRATION,
        name="calibration-en-fr",
        version=1,
        src_lang="en",
        tgt_lang="fr",
        params={"method": "head"},
        metrics={
            "labels": 30,
            "good": 24,
            "cross_validated": {"head": {"ece": 0.1, "brier": 0.2, "log_loss": 0.5, "reliability": reliability}},
        },
    )
    html = staff_client.get(reverse("calibration", args=["en", "fr"])).content.decode()
    cautions = html.count('class="caution model-caution"')
    assert cautions == 2
    assert "Trained on only 30 labels (24 GOOD, 6 BAD)" in html
    assert "Nearly constant: P(good) lies between 0.8262 and 0.8271 over the labelled pairs (cross-validated)" in html
    # The reliability diagram: one marker per bin, each with its label count.
    assert html.count('class="reliability-bin"') == 3 and ": 10 labels, mean P(good) 0.826" in html


def test_feedback_index_lists_each_pair_with_its_calibration_page(staff_client, pair) -> None:
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key=scale_key(pair), threshold=1.2, target_precision=0.9
    )
    html = staff_client.get(reverse("feedback")).content.decode()
    row = html[html.index('<table id="pairs">') :]
    assert f'<a href="{reverse("calibration", args=["en", "fr"])}">en → fr</a>' in row
    assert "score ≥ 1.2000 (target 0.900) on <code>usem3 v1/ratio/k=4/max_score</code> runs" in row
    assert "none yet" in row


def test_applying_a_calibration_opens_its_job_which_links_the_runs_results(staff_client, pair) -> None:
    from mining.models import Artefact, ArtefactKind

    Artefact.objects.create(
        kind=ArtefactKind.CALIBRATION, name="calibration-en-fr", version=1, src_lang="en", tgt_lang="fr",
        params={"method": "head"}, metrics={"labels": 300, "good": 200},
    )  # fmt: skip
    # (the job is sent to the broker on commit, which a test in a transaction never reaches)
    response = staff_client.post(reverse("calibration-apply", args=["en", "fr"]), {"run": pair.pk, "confirm": "on"})
    job = MiningRun.objects.get(kind=RunKind.APPLY_CALIBRATION)
    assert job.parent_id == pair.pk
    assert response.status_code == 302 and response.url == reverse("run-detail", args=[job.pk])
    html = staff_client.get(reverse("calibration", args=["en", "fr"])).content.decode()
    applications = html[html.index('id="applications"') :]
    assert f'href="{reverse("run-detail", args=[job.pk])}"' in applications
    assert f'href="{reverse("run-results", args=[pair.pk])}"' in applications


def test_training_on_too_few_labels_is_refused_before_a_run_is_queued(staff_client, pair) -> None:
    """With 8 labels the train button queued a calibration run that failed at once with "ValueError: 8 labels ..."
    (walk); the page now says so and queues nothing."""
    response = staff_client.post(reverse("calibration-train", args=["en", "fr"]), {"method": "head"})
    assert response.status_code == 302 and response["Location"] == reverse("calibration", args=["en", "fr"])
    assert [str(m) for m in get_messages(response.wsgi_request)] == [
        "Not trained: 0 labels (0 GOOD) for en-fr: calibration needs at least 20, with both GOOD and BAD. "
        "Review more pairs first."
    ]
    assert not MiningRun.objects.filter(kind=RunKind.CALIBRATE).exists()
