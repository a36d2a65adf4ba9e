"""A crawl from the browser: upload a WARC file on the import page (its skipped records counted there), see the
corpus's sites, start a document run on it (matched within sites by default, on a real worker), open a document pair
and find both URLs linked and their language markers explained, step to the next pair and back to the results. Then
every link on every page the test visited is followed: none may lead to an error (404 or other).
Screenshots: test-artifacts/screenshots/crawl-*.png.
"""

from __future__ import annotations

import re

import pytest

from mining.models import Corpus, DocumentPairCandidate, JobStatus, MiningRun, RunKind
from tests.browser.conftest import broken_links, login
from tests.mining.importers.crawl_warc import PNG, Warc, admin_pages
from tests.mining.importers.crawl_warc import page as html

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _warc(tmp_path):
    w = Warc(tmp_path / "my-crawl.warc.gz")
    for n, (en, fr) in enumerate(admin_pages()[:4]):
        w.response(f"https://docs.example.org/en/page{n}.html", html(f"Page {n}", en))
        w.response(f"https://docs.example.org/fr/page{n}.html", html(f"Page {n}", fr, nav="Accueil | Aide"))
    w.response("https://docs.example.org/robots.txt", "User-agent: *\n", ctype="text/plain")
    w.response("https://docs.example.org/logo.png", PNG, ctype="image/png")
    w.response("https://docs.example.org/", b"", status="302 Found", headers=[("Location", "/en/")])
    return w.close()


def test_a_warc_goes_in_and_ends_at_a_document_pair(
    page, django_user_model, screenshot, celery_worker_process, tmp_path
):
    django_user_model.objects.create_user("crawler", password="pw-crawler-123", is_staff=True)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    visited: list[str] = []
    page.on("framenavigated", lambda frame: visited.append(frame.url) if frame == page.main_frame else None)
    page.set_default_timeout(30_000)
    login(page, "crawler", "pw-crawler-123")

    page.goto("/imports/new/")
    page.fill("input[name=name]", "my-crawl")
    page.select_option("select[name=format]", "warc")
    page.set_input_files("input[type=file]", str(_warc(tmp_path)))
    screenshot(page, "crawl-01-import-form")
    page.click("main form button[type=submit]")
    page.wait_for_selector("#mine-this-corpus", timeout=120_000)
    screenshot(page, "crawl-02-import-done")
    assert "8 pages stored" in page.inner_text("#crawl-summary")
    skips = page.inner_text("#crawl-skips")
    assert all(reason in skips for reason in ("robots_txt", "not_html", "redirect"))
    assert "image/png" in skips and "HTTP 302 to /en/" in skips
    assert "my-crawl.warc.gz @ " in skips  # examples name the file as uploaded and the record's offset

    page.click("text=see the corpus")
    sites = page.inner_text("#corpus-sites")
    assert "example.org" in sites and re.search(r"example\.org\s+4\s+4\s+8", sites)
    screenshot(page, "crawl-03-corpus-sites")

    page.click("#mine-corpus")
    page.select_option("select[name=kind]", "document")
    # the kind's change swaps the whole form (htmx): choose the languages in the swapped one, not in the old one
    page.wait_for_selector("#run-start-form input[name=shown_kind][value=document]", state="attached")
    page.select_option("select[name=src_lang]", "en")
    page.select_option("select[name=tgt_lang]", "fr")
    page.click("#run-start-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    page.wait_for_selector("#run-progress[data-status=succeeded], #run-progress[data-status=failed]", timeout=300_000)
    corpus = Corpus.objects.get(name="my-crawl")
    run = MiningRun.objects.get(src_corpus=corpus, kind=RunKind.DOCUMENT)
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert run.stats["site_scope"] == "site" and run.stats["distributed"] is True
    screenshot(page, "crawl-04-run-finished")

    page.click("#results-link")
    page.wait_for_selector("table.candidates tr.candidate")
    best = DocumentPairCandidate.objects.select_related("src", "tgt").get(run=run, rank=1)
    page.locator("tr.candidate[data-rank='1'] a.review-pair").click()
    page.wait_for_selector("#pair-urls")
    screenshot(page, "crawl-05-document-pair")
    links = page.locator("#pair-urls a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [best.src.url, best.tgt.url]
    assert best.src.url.replace("/en/", "/fr/") == best.tgt.url
    evidence = page.inner_text("#url-evidence")
    assert "differ only by their language markers (path en → path fr)" in evidence
    assert "which name the pages' languages" in evidence and "signal 1.0 × weight 0.2" in evidence

    # The pair page is no dead end: the next pair of the run, the previous one, back to the results.
    second = DocumentPairCandidate.objects.get(run=run, rank=2)
    page.click("#next-pair")
    page.wait_for_url(re.compile(rf"/review/document-pairs/{second.pk}/$"))
    assert "rank 2" in page.inner_text("#pair-nav")
    page.click("#pair-nav a[rel=prev]")
    page.wait_for_url(re.compile(rf"/review/document-pairs/{best.pk}/$"))
    page.click(f"#pair-nav a[href='/runs/{run.pk}/results/']")
    page.wait_for_selector("table.candidates tr.candidate")

    # Every link on the pages visited (dashboard, import, corpus, run, results, pair pages, the API's and the admin's
    # front pages) leads somewhere.
    pages = [u for u in visited if "/accounts/login" not in u] + ["/", "/api/", "/api/docs/", "/admin/", "/exports/"]
    assert broken_links(page, pages) == {}
    assert errors == []
