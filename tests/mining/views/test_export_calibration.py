"""Exports and the candidates API carry each pair's calibrated confidence and the calibration model's version, read
in the same query as the pairs (no query per row)."""

from __future__ import annotations

import json
import zipfile
from xml.etree import ElementTree

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from mining.models import Artefact, ArtefactKind, SentencePairCandidate
from mining.services.export import ExportFormat, KeepMode, KeepRule, export_stream
from mining.services.export_files import export_build_file
from tests.factories.mining import make_run

pytestmark = pytest.mark.django_db


def calibrated_run(n: int = 3):
    """n candidates (scores 1.5, 1.4, ...); all but the last carry a confidence from calibration-en-fr v3."""
    run = make_run(n)
    model, _ = Artefact.objects.get_or_create(
        kind=ArtefactKind.CALIBRATION,
        name="calibration-en-fr",
        version=3,
        defaults={"src_lang": "en", "tgt_lang": "fr"},
    )
    for cand in SentencePairCandidate.objects.filter(run=run, rank__lt=n):
        SentencePairCandidate.objects.filter(pk=cand.pk).update(confidence=0.9 - 0.1 * cand.rank, calibration=model)
    return run, model


def _text(run, fmt: ExportFormat, side: str = "src") -> str:
    return "".join(export_stream(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=fmt, side=side))


def test_tsv_has_confidence_and_calibration_next_to_each_other():
    run, _ = calibrated_run()
    rows = [line.split("\t") for line in _text(run, ExportFormat.TSV).splitlines()]
    assert [r[4:6] for r in rows] == [["0.8000", "calibration-en-fr v3"], ["0.7000", "calibration-en-fr v3"], ["", ""]]
    assert all(len(r) == 7 for r in rows)


def test_tmx_and_jsonl_carry_the_calibration_version():
    run, model = calibrated_run()
    tus = ElementTree.fromstring(_text(run, ExportFormat.TMX).encode()).findall("./body/tu")
    props = [{p.get("type"): p.text for p in tu.findall("prop")} for tu in tus]
    assert [(p.get("x-confidence"), p.get("x-calibration")) for p in props] == [
        ("0.8000", "calibration-en-fr v3"),
        ("0.7000", "calibration-en-fr v3"),
        (None, None),
    ]
    rows = [json.loads(line) for line in _text(run, ExportFormat.JSONL).splitlines()]
    assert rows[0]["confidence"] == pytest.approx(0.8)
    assert rows[0]["calibration"] == {"id": model.pk, "name": "calibration-en-fr", "version": 3}
    assert rows[2]["confidence"] is None and rows[2]["calibration"] is None


def test_moses_scores_side_is_line_aligned_with_the_text_sides(staff_client):
    run, _ = calibrated_run()
    response = staff_client.get(
        reverse("run-export", args=[run.pk]),
        {"format": "moses", "side": "scores", "keep": "threshold", "download": "1"},
    )
    assert response["Content-Disposition"].endswith('.scores"')
    lines = b"".join(response.streaming_content).decode().splitlines()
    assert lines == [
        "1\t1.500000\t0.500000\t0.8000\tcalibration-en-fr v3",
        "2\t1.400000\t0.500000\t0.7000\tcalibration-en-fr v3",
        "3\t1.300000\t0.500000\t\t",
    ]
    path, _ = export_build_file(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=ExportFormat.MOSES)
    with zipfile.ZipFile(path) as zf:
        sides = {name.rsplit(".", 1)[1]: zf.read(name).decode().splitlines() for name in zf.namelist()}
    assert sides["scores"] == lines and sides["en"] == ["source 0", "source 1", "source 2"]


@pytest.mark.parametrize("fmt", [f for f in ExportFormat if f is not ExportFormat.PARQUET])  # text formats
def test_export_reads_the_calibration_without_a_query_per_row(fmt):
    counts = []
    for n in (2, 30):
        run, _ = calibrated_run(n)
        with CaptureQueriesContext(connection) as ctx:
            assert len(_text(run, fmt).splitlines()) >= n
        counts.append(len(ctx))
    assert counts[0] == counts[1]


def test_candidates_api_carries_the_calibration(staff_user):
    api = APIClient()
    api.force_authenticate(staff_user)
    counts = []
    for n in (2, 30):
        run, model = calibrated_run(n)
        with CaptureQueriesContext(connection) as ctx:
            body = api.get(f"/api/runs/{run.pk}/candidates/", {"page_size": 50}).json()
        counts.append(len(ctx))
    first, last = body["results"][0], body["results"][-1]
    assert first["confidence"] == pytest.approx(0.8)
    assert first["calibration"] == {"id": model.pk, "name": "calibration-en-fr", "version": 3}
    assert last["confidence"] is None and last["calibration"] is None
    assert counts[0] == counts[1]


def test_parquet_export_holds_every_pair_in_a_constant_number_of_queries():
    import io

    import pyarrow.parquet as pq

    counts = []
    for n in (2, 30):
        run, _ = calibrated_run(n)
        with CaptureQueriesContext(connection) as ctx:
            data = b"".join(export_stream(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=ExportFormat.PARQUET))
        counts.append(len(ctx))
        table = pq.read_table(io.BytesIO(data))
        assert table.num_rows == n and table.column("rank").to_pylist() == list(range(1, n + 1))
        assert table.column("confidence").to_pylist()[0] == pytest.approx(0.8)
    assert counts[0] == counts[1]
