"""Export: streamed TSV/Moses/TMX/JSONL with provenance, keep rules, staff only, task-built files."""

from __future__ import annotations

import json
import zipfile
from xml.etree import ElementTree

import pytest
from django.urls import reverse

from mining.models import MiningRun
from mining.services.export import ExportFormat, KeepMode, KeepRule
from mining.services.export_files import export_build_file, export_files
from mining.tasks import export_run
from tests.factories.mining import make_document_run, make_run

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
            "metadata.json",  # the threshold, its source, the precision stated (or why none is)
            f"run{run.pk}-en-fr-threshold.en",
            f"run{run.pk}-en-fr-threshold.fr",
            f"run{run.pk}-en-fr-threshold.scores",
        ]
        assert zf.read(names[1]).decode().splitlines() == ["Hello <world> & co", "Good night"]
        assert json.loads(zf.read("metadata.json"))["threshold"] == 1.1
    page = staff_client.get(reverse("run-export", args=[run.pk])).content.decode()
    link = reverse("run-export-download", args=[run.pk, path.name])
    assert link in page
    download = staff_client.get(link)
    assert download.status_code == 200 and download["Content-Disposition"].startswith("attachment")
    # the page says what a built Moses file holds (walk: it said only "Moses streams one side per download")
    assert "Moses only: a download holds one side; a file built in the background holds all three (zip)." in page
    assert "(TSV: score, cosine, confidence, calibration and label columns)" in page
    # the run's threshold in its own sentence, not nested three parentheses deep (walk: "...max_score)))")
    assert 'left blank, the threshold is the\nrun\'s: <span id="export-threshold">' in page and ")))" not in page
    assert "as TSV, Moses, TMX, JSONL or Parquet:" in staff_client.get(reverse("export-list")).content.decode()


def test_build_view_enqueues_on_commit(staff_client, run, django_capture_on_commit_callbacks, monkeypatch):
    sent = []
    monkeypatch.setattr("mining.services.export_files.send_export_task", lambda *a: sent.append(a))
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


# --- document runs ------------------------------------------------------------------------------------------------


def _download(client, run, **params) -> str:
    response = client.get(reverse("run-export", args=[run.pk]), {"keep": "threshold", "download": "1", **params})
    assert response.status_code == 200
    return _body(response)


def test_document_run_jsonl_has_document_ids_titles_urls_scores_and_evidence(staff_client):
    run = make_document_run(aligned=False)
    rows = [json.loads(line) for line in _download(staff_client, run, format="jsonl").splitlines()]
    assert [(r["rank"], r["score"], r["src"]["external_id"], r["tgt"]["external_id"]) for r in rows] == [
        (1, 1.5, "p0", "p0"),
        (3, 1.1, "p2", "p2"),
    ]
    assert rows[0]["src"]["title"] == "Page 0" and rows[0]["tgt"]["url"] == "https://example.invalid/fr/0"
    assert rows[0]["evidence"]["retrieval"] == {"by": "hide", "rank": 1} and rows[0]["labels"] == {"good": 0, "bad": 0}
    assert "sentence_pairs" not in rows[0]
    rows = [
        json.loads(line) for line in _download(staff_client, run, format="jsonl", include_filtered="on").splitlines()
    ]
    assert [r["filter_reason"] for r in rows] == ["", "word_ratio", ""]


def test_document_run_line_formats_carry_whole_documents_before_alignment(staff_client):
    run = make_document_run(aligned=False)
    lines = _download(staff_client, run, format="tsv").splitlines()
    assert [line.split("\t") for line in lines] == [
        [
            "Page 0 line 0. Page 0 line 1.",
            "Feuille 0 line 0. Feuille 0 line 1.",
            "1.500000",
            "0.900000",
            "",
            "",
            "",
            "p0",
            "p0",
        ],
        [
            "Page 2 line 0. Page 2 line 1.",
            "Feuille 2 line 0. Feuille 2 line 1.",
            "1.100000",
            "0.900000",
            "",
            "",
            "",
            "p2",
            "p2",
        ],
    ]
    assert _download(staff_client, run, format="moses", side="tgt").splitlines() == [
        "Feuille 0 line 0. Feuille 0 line 1.",
        "Feuille 2 line 0. Feuille 2 line 1.",
    ]


def test_document_run_with_an_alignment_exports_its_sentence_pairs(staff_client):
    run = make_document_run(aligned=True)
    lines = [line.split("\t") for line in _download(staff_client, run, format="tsv").splitlines()]
    # kept document pairs 1 and 3; the aligner's "identical" pair of document pair 3 is left out
    assert [(c[0], c[1], c[7], c[8]) for c in lines] == [
        ("Page 0 line 0.", "Feuille 0 line 0.", "p0", "p0"),
        ("Page 0 line 1.", "Feuille 0 line 1.", "p0", "p0"),
        ("Page 2 line 0.", "Feuille 2 line 0.", "p2", "p2"),
    ]
    assert _download(staff_client, run, format="moses", side="src").splitlines() == [
        "Page 0 line 0.",
        "Page 0 line 1.",
        "Page 2 line 0.",
    ]
    root = ElementTree.fromstring(_download(staff_client, run, format="tmx").encode())
    tus = root.findall("./body/tu")
    assert [[s.text for s in tu.iter("seg")] for tu in tus][2] == ["Page 2 line 0.", "Feuille 2 line 0."]
    props = {p.get("type"): p.text for p in tus[2].findall("prop")}
    assert (props["x-src-doc"], props["x-tgt-doc"], props["x-doc-rank"], props["x-rank"]) == ("p2", "p2", "3", "5")
    rows = [json.loads(line) for line in _download(staff_client, run, format="jsonl").splitlines()]
    assert [[p["src"] for p in r["sentence_pairs"]] for r in rows] == [
        ["Page 0 line 0.", "Page 0 line 1."],
        ["Page 2 line 0."],
    ]
    assert rows[0]["alignment_run"] == MiningRun.objects.get(parent=run).pk


def test_document_run_moses_file_is_built_by_the_task():
    doc_run = make_document_run(aligned=True)
    result = export_run.apply(args=[doc_run.pk, "moses", "threshold", None, False]).get()
    assert result["pairs"] == 3
    [path] = export_files(run=doc_run)
    with zipfile.ZipFile(path) as zf:
        assert zf.read(f"run{doc_run.pk}-en-fr-threshold.fr").decode().splitlines() == [
            "Feuille 0 line 0.",
            "Feuille 0 line 1.",
            "Feuille 2 line 0.",
        ]


def test_the_page_posts_its_download_with_a_tsv_header_and_no_token_in_an_address(staff_client, run):
    page = staff_client.get(reverse("run-export", args=[run.pk])).content.decode()
    assert f'<form method="post" action="/runs/{run.pk}/export/" class="card" id="export-form">' in page
    assert 'name="header"' in page
    data = {"format": "tsv", "keep": "threshold", "download": "1", "header": "on"}
    lines = _body(staff_client.post(reverse("run-export", args=[run.pk]), data)).splitlines()
    assert lines[0] == "src\ttgt\tscore\tcosine\tconfidence\tcalibration\tlabel"
    assert [line.split("\t")[0] for line in lines[1:]] == ["Hello <world> & co", "Good night"]
    without = _body(staff_client.post(reverse("run-export", args=[run.pk]), {**data, "header": ""})).splitlines()
    assert without == lines[1:]


def test_building_in_the_background_keeps_the_chosen_format(staff_client, run, monkeypatch):
    sent = []
    monkeypatch.setattr("mining.services.export_files.send_export_task", lambda *a: sent.append(a))
    data = {"format": "jsonl", "keep": "both", "threshold": "1.2", "download": "1"}
    response = staff_client.post(reverse("run-export-build", args=[run.pk]), data)
    assert response.status_code == 302 and "format=jsonl" in response.url and "keep=both" in response.url
    page = staff_client.get(response.url).content.decode()
    assert '<option value="jsonl" selected>' in page and 'value="1.2"' in page


def test_a_tsv_file_built_with_a_header_starts_with_it(run):
    path, n = export_build_file(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=ExportFormat.TSV, header=True)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert n == 2 and lines[0].startswith("src\ttgt\tscore") and len(lines) == 3
    plain, _ = export_build_file(run=run, rule=KeepRule(mode=KeepMode.THRESHOLD), fmt=ExportFormat.TSV)
    assert plain != path and plain.read_text(encoding="utf-8").splitlines() == lines[1:]
