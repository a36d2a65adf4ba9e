"""Crawl imports on small WARC files built in the test: pages kept with their URL, site, language and title; every
kind of bad record skipped and counted by reason, with examples at their offsets; only an unreadable file fails."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path

import pytest

from mining.models import Corpus, Document, ImportJob, ImportPart, JobStatus, Sentence
from mining.services.imports import import_execute, import_job_create

from .crawl_warc import DE, EN, FR, PNG, Warc, page


def _import(paths: list[Path], name: str = "crawl", **options):
    job = import_job_create(corpus_name=name, fmt="warc", paths=[str(p) for p in paths], options=options)
    return import_execute(job=job)


def _good(w: Warc) -> None:
    w.request("https://www.example.org/en/about.html")
    w.response("https://www.example.org/en/about.html", page("About us", EN))
    w.response("https://www.example.org/fr/about.html", page("À propos", FR, nav="Accueil | Contact"))
    w.response("https://de.example.org/about", page("Über uns", DE, nav="Startseite | Kontakt"))


def _bad_records(w: Warc) -> None:
    w.response("https://www.example.org/", b"", status="301 Moved Permanently", headers=[("Location", "/en/")])
    w.response("https://www.example.org/robots.txt", "User-agent: *\nDisallow:\n", ctype="text/plain")
    w.response("https://www.example.org/logo.png", PNG, ctype="image/png")
    w.response("https://www.example.org/gone.html", "<html>gone</html>", status="404 Not Found")
    w.response("https://www.example.org/en/about.html", page("About us", EN))  # the same URL again
    w.response("https://www.example.org/en/about-copy.html", page("About us", EN))  # the same text
    w.response("https://www.example.org/fake.html", PNG)  # binary labelled text/html
    w.response("https://www.example.org/bomb.html", "<html><body>" + "<div>" * 3000 + "deep" + "</div>" * 3000)
    junk = bytes([0x81, 0x8D, 0x8F, 0x90, 0x9D, 0xFF, 0xFE] * 400)
    w.response("https://www.example.org/junk.html", b"<html><body><p>" + junk + b"</p></body></html>")
    w.response("https://www.example.org/huge.html", b"<html><body><p>" + b"word " * (10 << 20) + b"</p></body></html>")


@pytest.mark.django_db(transaction=True)
def test_pages_are_stored_and_each_bad_record_is_skipped_and_counted(tmp_path):
    w = Warc(tmp_path / "site.warc.gz")
    _good(w)
    _bad_records(w)
    damaged_at = w.fh.tell()
    noise = bytes(range(256)) * 8  # incompressible: the cut falls inside the member's deflate stream
    w.raw(gzip.compress(b"WARC/1.0\r\nWARC-Type: response\r\n" + noise)[:200])  # a member cut short
    w.response("https://www.example.org/en/contact.html", page("Contact", EN.replace("fox", "cat")))
    cut_at = w.fh.tell()
    w.raw(gzip.compress(b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: 2048\r\n\r\n" + noise)[:300])
    path = w.close()
    job = _import([path])
    assert job.status == JobStatus.SUCCEEDED, job.error
    docs = {d.url: d for d in Document.objects.filter(corpus=job.corpus)}
    assert sorted(docs) == [
        "https://de.example.org/about",
        "https://www.example.org/en/about.html",
        "https://www.example.org/en/contact.html",
        "https://www.example.org/fr/about.html",
    ]
    fr = docs["https://www.example.org/fr/about.html"]
    assert (fr.lang, fr.title, fr.host, fr.site) == ("fr", "À propos", "www.example.org", "example.org")
    assert fr.crawled_at is not None and fr.metadata["offset"] == w.offsets[fr.url]
    assert docs["https://de.example.org/about"].site == "example.org"
    assert docs["https://de.example.org/about"].lang == "de"
    texts = list(Sentence.objects.filter(document=fr).order_by("position").values_list("text", flat=True))
    assert texts[-1].startswith("Les enfants jouaient") and not any("cookies" in t or "Copyright" in t for t in texts)
    assert set(Sentence.objects.filter(document=fr).values_list("detected_lang", flat=True)) == {"fr"}
    stats = job.stats
    assert stats["skipped"] == {
        "redirect": 1,
        "robots_txt": 1,
        "not_html": 1,
        "http_error": 1,
        "duplicate_url": 1,
        "duplicate_content": 1,
        "binary": 1,
        "nesting_bomb": 1,
        "invalid_bytes": 1,
        "too_large": 1,
        "truncated_gzip": 2,
    }
    assert stats["documents"] == 4 and stats["files"] == 1 and stats["failed_files"] == []
    ex = stats["examples"]
    assert ex["binary"][0]["offset"] == w.offsets["https://www.example.org/fake.html"]
    assert ex["binary"][0]["url"] == "https://www.example.org/fake.html"
    assert ex["too_large"][0]["detail"].startswith("52,")
    assert [e["offset"] for e in ex["truncated_gzip"]] == [damaged_at, cut_at]
    assert ex["redirect"][0]["detail"] == "HTTP 301 to /en/"
    assert set(job.corpus.languages) == {"en", "fr", "de"}


@pytest.mark.django_db(transaction=True)
def test_a_mis_sized_record_and_garbage_in_a_plain_warc_lose_only_themselves(tmp_path):
    w = Warc(tmp_path / "plain.warc", gz=False)
    w.response("https://s.org/en/a", page("A", EN))
    raw = io.BytesIO()
    from warcio.warcwriter import WARCWriter

    tmp = WARCWriter(raw, gzip=False)
    tmp.write_record(
        tmp.create_warc_record(
            "https://s.org/en/bad", "response", payload=io.BytesIO(b"HTTP/1.1 200 OK\r\n\r\n<p>x</p>")
        )
    )
    record = raw.getvalue().replace(b"Content-Length: ", b"Content-Length: 9")  # claims far more than it has
    bad_at = w.fh.tell()
    w.raw(record)
    fr_at = w.fh.tell()
    w.response("https://s.org/fr/a", page("A", FR))
    w.raw(b"garbage between records\r\n\r\n")
    w.response("https://s.org/de/a", page("A", DE))
    job = _import([w.close()])
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert sorted(Document.objects.filter(corpus=job.corpus).values_list("lang", flat=True)) == ["de", "en", "fr"]
    assert job.stats["skipped"] == {"corrupt_record": 2}
    examples = job.stats["examples"]["corrupt_record"]
    assert (examples[0]["offset"], examples[0]["url"]) == (bad_at, "https://s.org/en/bad")
    assert examples[0]["detail"] == "its Content-Length runs into the next record"
    assert examples[1]["offset"] == fr_at and "Invalid WARC header" in examples[1]["detail"]


@pytest.mark.django_db(transaction=True)
def test_charsets_that_lie_or_are_missing_are_repaired(tmp_path):
    text = "Un été très chaud à Paris : les élèves sont allés à la plage avec leurs professeurs."
    w = Warc(tmp_path / "charset.warc.gz")
    w.response("https://s.org/a", page("Été", text).encode("cp1252"))  # says utf-8 (header and meta), is cp1252
    w.response(
        "https://s.org/b", page("Été", text + " Vraiment.", charset="iso-8859-1"), ctype="text/html; charset=iso-8859-1"
    )  # says latin-1, is utf-8
    w.response(
        "https://s.org/c",
        page("Été", text + " Encore.").replace('<meta charset="utf-8">', "").encode("cp1252"),
        ctype="text/html",
    )  # says nothing
    job = _import([w.close()])
    assert job.status == JobStatus.SUCCEEDED, job.error
    seconds = (
        Sentence.objects.filter(corpus=job.corpus, position=1).order_by("document__url").values_list("text", flat=True)
    )
    assert [t[:25] for t in seconds] == ["Un été très chaud à Paris"] * 3  # after the heading, Été
    fixed = dict(Document.objects.filter(corpus=job.corpus).values_list("url", "metadata__charset_fixed"))
    assert fixed["https://s.org/a"] is True and fixed["https://s.org/b"] is True


@pytest.mark.django_db(transaction=True)
def test_files_share_a_corpus_and_duplicates_across_files_are_skipped(tmp_path):
    a = Warc(tmp_path / "a.warc.gz")
    _good(a)
    b = Warc(tmp_path / "b.warc.gz")
    b.response("https://www.example.org/en/about.html", page("About us", EN))  # in a.warc.gz already
    b.response("https://mirror.example.net/en/about.html", page("About us", EN))  # same text, other site
    b.response("https://www.example.org/fr/contact.html", page("Contact", FR.replace("renard", "chat")))
    job = _import([a.close(), b.close()])
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.stats["documents"] == 4 and job.stats["files"] == 2
    assert job.stats["skipped"] == {"duplicate_url": 1, "duplicate_content": 1}
    parts = list(ImportPart.objects.filter(job=job).order_by("part_no").values_list("status", "stats__documents"))
    assert parts == [(JobStatus.SUCCEEDED, 3), (JobStatus.SUCCEEDED, 1)]
    assert job.done == job.total > 0  # progress in bytes


@pytest.mark.django_db(transaction=True)
def test_only_an_unreadable_file_fails(tmp_path):
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(zlib.compress(b"not a warc at all " * 100))
    job = _import([junk])
    assert job.status == JobStatus.FAILED
    assert "no WARC record could be read" in job.error and "junk.warc.gz" in job.error
    assert not Document.objects.exists()
    good = Warc(tmp_path / "good.warc.gz")
    _good(good)
    job = _import([good.close(), junk], name="mixed")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.stats["documents"] == 3
    assert [f["file"] for f in job.stats["failed_files"]] == [str(junk)]
    assert Corpus.objects.get(name="mixed").documents.count() == 3


@pytest.mark.django_db(transaction=True)
def test_wet_records_and_mixed_language_pages(tmp_path):
    w = Warc(tmp_path / "cc.warc.wet.gz")
    w.conversion("https://news.example.com/en/story", EN)
    w.conversion("https://news.example.com/fr/story", FR + "\n" + EN.split(". ")[0] + ". " + EN.split(". ")[1] + ".")
    job = _import([w.close()])
    assert job.status == JobStatus.SUCCEEDED, job.error
    fr = Document.objects.get(corpus=job.corpus, url="https://news.example.com/fr/story")
    assert fr.lang == "fr" and set(fr.metadata["languages"]) == {"fr", "en"}
    langs = list(Sentence.objects.filter(document=fr).order_by("position").values_list("detected_lang", flat=True))
    assert langs[:3] == ["fr", "fr", "fr"] and langs[-1] == "en"


@pytest.mark.django_db(transaction=True)
def test_a_folder_of_saved_pages(tmp_path):
    root = tmp_path / "saved"
    (root / "www.example.org" / "fr").mkdir(parents=True)
    (root / "www.example.org" / "fr" / "a.html").write_text(page("A", FR))
    (root / "other").mkdir()
    (root / "other" / "b.htm").write_text("<!-- saved from url=(0030)https://blog.example.net/en/b -->" + page("B", EN))
    (root / "notes.txt").write_text("not a page")
    job = import_execute(job=import_job_create(corpus_name="saved", fmt="html", paths=[str(root)]))
    assert job.status == JobStatus.SUCCEEDED, job.error
    got = sorted(Document.objects.filter(corpus=job.corpus).values_list("url", "site", "lang"))
    assert got == [
        ("http://www.example.org/fr/a.html", "example.org", "fr"),
        ("https://blog.example.net/en/b", "example.net", "en"),
    ]


@pytest.mark.worker
def test_a_crawls_files_are_imported_by_the_workers(celery_workers, tmp_path):
    from mining.services.imports import import_job_enqueue
    from tests.conftest import wait_for

    paths = []
    for n in range(4):
        w = Warc(tmp_path / f"part-{n}.warc.gz")
        w.response(f"https://s{n}.example.org/en/a", page(f"A{n}", EN.replace("fox", f"fox number {n}")))
        w.response(f"https://s{n}.example.org/fr/a", page(f"A{n}", FR.replace("renard", f"renard numéro {n}")))
        paths.append(w.close())
    workers = celery_workers.start(2)
    job = import_job_create(corpus_name="shared", fmt="warc", paths=[str(p) for p in paths])
    import_job_enqueue(job=job)
    assert wait_for(lambda: ImportJob.objects.get(pk=job.pk).is_finished, timeout=180), "the import did not finish"
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.stats["documents"] == 8 and job.stats["files"] == 4
    parts = ImportPart.objects.filter(job=job)
    assert sorted(parts.values_list("part_no", "status")) == [(n, JobStatus.SUCCEEDED) for n in range(4)]
    assert set(parts.values_list("lease_owner", flat=True)) <= {celery_workers.owner(p) for p in workers}
    assert Document.objects.filter(corpus=job.corpus).count() == 8
