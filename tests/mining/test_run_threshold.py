"""Which threshold keeps a run's candidates: the run's own, else the one calibrated for its pair on its scoring
configuration, else the run's label-free default, else none."""

from __future__ import annotations

import pytest

from mining.models import LanguagePairSetting, RunKind
from mining.selectors import run_threshold, run_threshold_info, scale_key
from tests.factories.mining import MiningRunFactory

pytestmark = pytest.mark.django_db

DEFAULT = {"threshold": 1.12, "method": "two_component_fit", "estimated_precision": 0.95, "assumption": "..."}


def test_precedence_run_then_calibrated_then_default_then_none() -> None:
    run = MiningRunFactory(kind=RunKind.SENTENCE, src_lang="en", tgt_lang="fr", stats={"default_threshold": DEFAULT})
    info = run_threshold_info(run)
    assert (info.value, info.source, info.detail["estimated_precision"]) == (1.12, "default", 0.95)

    # a threshold stored for another scoring configuration of the pair does not apply
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key="usem3 v1/distance/k=4/max_score", threshold=0.2
    )
    assert (run_threshold_info(run).value, run_threshold_info(run).source) == (1.12, "default")
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key=scale_key(run), threshold=1.3, target_precision=0.9
    )
    info = run_threshold_info(run)
    assert (info.value, info.source, info.detail) == (1.3, "calibrated", {"target_precision": 0.9})

    run.params = {"threshold": 1.05}
    assert run_threshold_info(run).source == "run" and run_threshold(run) == 1.05

    bare = MiningRunFactory(kind=RunKind.SENTENCE, src_lang="de", tgt_lang="fr", stats={})
    assert (run_threshold(bare), run_threshold_info(bare).source) == (None, "none")
    # a pair setting for en-fr does not apply to a de-fr run, nor to a document run of en-fr (another scale)
    doc = MiningRunFactory(kind=RunKind.DOCUMENT, src_lang="en", tgt_lang="fr", stats={}, params={})
    assert scale_key(doc) == "document rerank/usem3 v1/ratio/k=4/max_score"
    assert run_threshold(doc) is None


def test_scale_keys_of_each_kind() -> None:
    run = MiningRunFactory(params={"margin": "distance", "k": 8, "strategy": "intersection"})
    assert scale_key(run) == "usem3 v1/distance/k=8/intersection"
    align = MiningRunFactory(kind=RunKind.ALIGN, params={"threshold": 0.4})
    assert scale_key(align) == "align/usem3 v1"
    # an alignment run's old "threshold" is the document pairs' (read as doc_threshold), not its own keep threshold
    assert run_threshold_info(align).source == "none"
    assert scale_key(MiningRunFactory(kind=RunKind.CALIBRATE, params={})) == ""
