"""`manage.py export RUN_ID OUT_FILE` writes a run's kept bitext without a web server."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from mining.models import JobStatus, LanguagePairSetting, RunKind
from mining.selectors import scale_key
from tests.factories.mining import MiningRunFactory, SentencePairCandidateFactory

pytestmark = pytest.mark.django_db


def test_export_writes_the_pairs_the_pair_threshold_keeps_with_a_header(tmp_path, capsys):
    run = MiningRunFactory()
    for i, (score, reason) in enumerate([(1.5, ""), (1.2, ""), (1.4, "too_short"), (0.9, "")]):
        SentencePairCandidateFactory(run=run, score=score, rank=i + 1, filter_reason=reason, src__text=f"s{i}")
    LanguagePairSetting.objects.create(src_lang="en", tgt_lang="fr", scale_key=scale_key(run), threshold=1.0)
    out = tmp_path / "kept.tsv"
    call_command("export", run.pk, str(out), "--header")
    lines = out.read_text().splitlines()
    assert lines[0] == "src\ttgt\tscore\tcosine\tconfidence\tcalibration\tlabel"
    assert [line.split("\t")[0] for line in lines[1:]] == ["s0", "s1"]
    assert [line.split("\t")[2] for line in lines[1:]] == ["1.500000", "1.200000"]
    meta = json.loads((tmp_path / "kept.tsv.meta.json").read_text())  # what the file is
    assert meta["reason"].startswith("not estimated yet")
    assert (meta["threshold"], meta["source"], meta["source_label"], meta["run"]) == (
        1.0,
        "calibrated",
        "calibrated on labels",
        run.pk,
    )
    assert f"run {run.pk}: 2 pairs (threshold, threshold 1.0000) written to {out}" in capsys.readouterr().err


def test_export_refuses_what_has_no_pairs(tmp_path):
    with pytest.raises(CommandError, match="no run 999999"):
        call_command("export", 999999, str(tmp_path / "x"))
    calibrate = MiningRunFactory(kind=RunKind.CALIBRATE, src_corpus=None, tgt_corpus=None)
    with pytest.raises(CommandError, match="train calibration model run: it has no pairs"):
        call_command("export", calibrate.pk, str(tmp_path / "x"))
    running = MiningRunFactory(status=JobStatus.RUNNING)
    with pytest.raises(CommandError, match="is running: export it once it has succeeded"):
        call_command("export", running.pk, str(tmp_path / "x"))
