"""Which threshold keeps a run's candidates: the run's own, else the pair's calibrated one, else the run's
label-free default, else none."""

from __future__ import annotations

import pytest

from mining.models import LanguagePairSetting, RunKind
from mining.selectors import run_threshold, run_threshold_info
from tests.factories.mining import MiningRunFactory

pytestmark = pytest.mark.django_db

DEFAULT = {"threshold": 1.12, "method": "two_component_fit", "estimated_precision": 0.95, "assumption": "..."}


def test_precedence_run_then_calibrated_then_default_then_none() -> None:
    run = MiningRunFactory(kind=RunKind.SENTENCE, src_lang="en", tgt_lang="fr", stats={"default_threshold": DEFAULT})
    info = run_threshold_info(run)
    assert (info.value, info.source, info.detail["estimated_precision"]) == (1.12, "default", 0.95)

    LanguagePairSetting.objects.create(src_lang="en", tgt_lang="fr", threshold=1.3, target_precision=0.9)
    info = run_threshold_info(run)
    assert (info.value, info.source, info.detail) == (1.3, "calibrated", {"target_precision": 0.9})

    run.params = {"threshold": 1.05}
    assert run_threshold_info(run).source == "run" and run_threshold(run) == 1.05

    bare = MiningRunFactory(kind=RunKind.SENTENCE, src_lang="de", tgt_lang="fr", stats={})
    assert (run_threshold(bare), run_threshold_info(bare).source) == (None, "none")
    # a pair setting for en-fr does not apply to a de-fr run, nor to a document run of en-fr
    doc = MiningRunFactory(kind=RunKind.DOCUMENT, src_lang="en", tgt_lang="fr", stats={})
    assert run_threshold(doc) is None
