"""Export: streamed TSV/Moses/TMX/JSONL with provenance, keep rules, staff only, task-built files."""

from __future__ import annotations

import json
import zipfile
from xml.etree import ElementTree

import pytest
from django.urls import reverse

from mining.services.export import ExportFormat, KeepMode, KeepRule, export_build_file, export_files
from mining.tasks import export_run
from tests.mining.views.test_results import make_run

pytestmark = pytest.mark.django_db


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def run():
    return make_run(
        4,
        scores=[1.4, 1.3, 1.2, 1.0],
        reasons={1: "too_short"},
        texts=[("Hello <world> & co", "Bonjour\tle monde"), ("x", "y"), ("Good\nnight", "Bonne nuit"), ("Low", "Bas")],
        params={"threshold": 1.1},
    )


def test_tsv_uses_run_threshold_and_skips_filtered(staff_client, run):
    response = staff_client.get(
        reverse("run-export", args=[run.pk]), {"format": "tsv", "keep": "threshold", "download": "1"}
    )
    assert response.streaming and response["Content-Disposition"].endswith('.tsv"')
    lines = _body(response).splitlines()
    assert [line.split("\t")[:2] for line in lines] == [
        ["Hello <world> & co", "Bonjour le monde"],
        ["Good night", "Bonne nuit"],
    ]
    assert lines[0].split("\t")[2] == "1.400000"


def test_explicit_threshold_and_include_filtered(staff_client, run):
    response = staff_client.get(
        reverse("run-export", args=[run.pk]),
        {
            "format": "moses",
            "side": "tgt",
            "keep": "threshold",
            "threshold": "0.5",
            "include_filtered": "on",
            "download": "1",
        },
    )
    assert _body(response).splitlines() == ["Bonjour le monde", "y", "Bonne nuit", "Bas"]


def test_tmx_is_valid_xml_with_provenance(staff_client, run):
    response = staff_client.get(
        reverse("run-export", args=[run.pk]), {"format": "tmx", "keep": "threshold", "download": "1"}
    )
    root = ElementTree.fromstring(_body(response).encode())
    assert root.get("version") == "1.4"
    tus = root.findall("./body/tu")
    assert len(tus) == 2
    segs = [s.text for s in tus[0].iter("seg")]
    assert segs == ["Hello <world> & co", "Bonjour\tle monde"]
    props = {p.get("type"): p.text for p in tus[0].findall("prop")}
    assert props["x-run"] == str(run.pk) and props["x-score"] == "1.400000" and props["x-rank"] == "1"
    assert tus[0].find("tuv").get("{http://www.w3.org/XML/1998/namespace}lang") == "en"


def test_jsonl_rows(staff_client, run):
    response = staff_client.get(
        reverse("run-export", args=[run.pk]), {"format": "jsonl", "keep": "threshold", "download": "1"}
    )
    rows = [json.loads(line) for line in _body(response).splitlines()]
    assert [r["rank"] for r in rows] == [1, 3]
    assert rows[1]["src"] == "Good\nnight" and rows[0]["run"] == run.pk
    assert rows[0]["labels"] == {"good": 0, "bad": 0} and rows[0]["encoder"]


def test_good_only_without_labels_exports_nothing(staff_client, run):
    response = staff_client.get(
        reverse("run-export", args=[run.pk]), {"format": "tsv", "keep": "good", "download": "1"}
    )
    assert _body(response) == ""


def test_export_is_staff_only(reviewer_client, run):
    assert reviewer_client.get(reverse("run-export", args=[run.pk])).status_code == 403
    assert (
        reviewer_client.get(
            reverse("run-export", args=[run.pk]), {"format": "tsv", "keep": "threshold", "download": "1"}
        ).status_code
        == 403
    )


def test_task_builds_moses_zip_and_page_links_it(staff_client, run):
    result = export_run.apply(args=[run.pk, "moses", "threshold", None, False]).get()
    assert result["pairs"] == 2
    [path] = export_files(run=run)
    with zipfile.ZipFile(path) as zf:
        names = sorted(zf.namelist())
        assert names == [
            f"run{run.pk}-en-fr-threshold.en",
            f"run{run.pk}-en-fr-threshold.fr",
            f"run{run.pk}-en-fr-threshold.scores",
        ]
        assert zf.read(names[0]).decode().splitlines() == ["Hello <world> & co", "Good night"]
    page = staff_client.get(reverse("run-export", args=[run.pk])).content.decode()
    link = reverse("run-export-download", args=[run.pk, path.name])
    assert link in page
    download = staff_client.get(link)
    assert download.status_code == 200 and download["Content-Disposition"].startswith("attachment")


def test_build_view_enqueues_on_commit(staff_client, run, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr("mining.tasks.export_run.delay", lambda *a: sent.append(a))
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("run-export-build", args=[run.pk]), {"format": "tmx", "keep": "both", "threshold": "1.2"}
        )
    assert response.status_code == 302
    assert sent == [(run.pk, "tmx", "both", 1.2, False)]


def test_download_rejects_foreign_names(staff_client, run):
    for name in ("..%2F..%2Fetc%2Fpasswd", f"run{run.pk + 1}-tsv-0123456789.tsv", "secret.tsv"):
        assert staff_client.get(f"/runs/{run.pk}/export/files/{name}").status_code == 404


def test_build_file_counts_tmx_pairs(run):
    path, n = export_build_file(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=ExportFormat.TMX)
    assert n == 2 and path.suffix == ".tmx"
    assert len(ElementTree.parse(path).getroot().findall("./body/tu")) == 2
