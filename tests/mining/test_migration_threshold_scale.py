"""Migration 0012 places each stored threshold on the scale of the runs it was found on, or drops it when those runs
span several scoring configurations (its number mixed scales)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from mining.models import LanguagePairSetting
from tests.factories.annotation import LabelFactory
from tests.factories.mining import MiningRunFactory, SentencePairCandidateFactory

pytestmark = pytest.mark.django_db

migration = importlib.import_module("mining.migrations.0012_h27a_threshold_scale")


def test_a_setting_gets_the_key_of_its_labelled_runs_or_is_dropped(capsys) -> None:
    ratio = MiningRunFactory(params={"margin": "ratio", "k": 4})
    LabelFactory(sentence_pair=SentencePairCandidateFactory(run=ratio))
    MiningRunFactory(params={"margin": "distance"})  # unlabelled: the threshold was not found on it
    mixed = [MiningRunFactory(src_lang="de", params={"margin": m}) for m in ("ratio", "distance")]
    for run in mixed:
        LabelFactory(sentence_pair=SentencePairCandidateFactory(run=run))
    LanguagePairSetting.objects.create(src_lang="en", tgt_lang="fr", scale_key="", threshold=1.17)
    LanguagePairSetting.objects.create(src_lang="de", tgt_lang="fr", scale_key="", threshold=1.2)
    migration.place_settings(apps, None)
    assert list(LanguagePairSetting.objects.values_list("src_lang", "scale_key")) == [
        ("en", "usem3 v1/ratio/k=4/max_score")
    ]
    assert "dropped the de-fr threshold 1.2000: its runs span 2 scoring configurations" in capsys.readouterr().out
