"""The calibration page parses every field through a form: malformed or missing values give a message, never a 500,
and a language pair with no run is a 404."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from mining.models import LanguagePairSetting, MiningRun, RunKind

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
        reverse("calibration-apply", args=["en", "fr"]), {"threshold": "1.07", "target": "0.95", "estimate": "0.96"}
    )
    assert response.status_code == 302
    setting = LanguagePairSetting.objects.get(src_lang="en", tgt_lang="fr")
    assert (setting.threshold, setting.target_precision, setting.estimated_precision) == (1.07, 0.95, 0.96)
