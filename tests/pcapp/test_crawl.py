"""Every page is reachable by clicking from the dashboard and none of them fails: a breadth-first crawl, as staff and
as a reviewer, of every link (and form target) from the dashboard, over data with a run of every kind that has
pages (sentence, document, calibration, applied calibration), a campaign with labels, a stored threshold and an
import."""

from __future__ import annotations

import json
from collections import deque
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.exceptions import Resolver404

from annotation.models import Label, LabelMode, Verdict
from annotation.services import campaign_create
from annotation.spec import CampaignSpec
from mining.models import (
    Artefact,
    ArtefactKind,
    DocumentPairCandidate,
    ImportJob,
    JobStatus,
    LanguagePairSetting,
    MiningRun,
    RunKind,
)
from mining.selectors import scale_key
from pcapp import api_root
from tests.factories.mining import (
    CorpusFactory,
    DocumentFactory,
    MiningRunFactory,
    SentenceFactory,
    SentencePairCandidateFactory,
)

MAX_PAGES = 400
MAX_VARIANTS = 3  # query-string variants fetched per path (filters, pages)
SKIP_PREFIXES = ("/static/", "/admin/")  # Django's admin is Django's; its index alone is fetched


class Links(HTMLParser):
    """The href of every <a> and the action (with its method) of every <form>."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.forms: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"] or "")
        if tag == "form":
            self.forms.append(((a.get("action") or ""), (a.get("method") or "get").lower()))


def _json_urls(value) -> list[str]:
    if isinstance(value, dict):
        return [u for v in value.values() for u in _json_urls(v)]
    if isinstance(value, list):
        return [u for v in value for u in _json_urls(v)]
    if isinstance(value, str) and value.startswith("http://testserver/") and "{id}" not in value:
        return [value]
    return []


def crawl(client, start: str = "/") -> tuple[dict[str, int], set[str]]:
    """Fetch every same-site link reachable from `start` (GET), breadth first; returns {url: status} and the paths
    of POST form targets seen (reached by clicking a button, not fetched)."""
    seen: dict[str, int] = {}
    posts: set[str] = set()
    variants: dict[str, int] = {}
    queue = deque([start, "/favicon.ico"])  # browsers ask for /favicon.ico by themselves
    while queue and len(seen) < MAX_PAGES:
        url = queue.popleft()
        if url in seen:
            continue
        path = urlsplit(url).path
        if urlsplit(url).query:
            if variants.get(path, 0) >= MAX_VARIANTS:
                continue
            variants[path] = variants.get(path, 0) + 1
        response = client.get(url)
        seen[url] = response.status_code
        if response.status_code in (301, 302) and not url.startswith("/favicon"):
            queue.append(urljoin(url, response["Location"]))
            continue
        content_type = response.get("Content-Type", "")
        if response.streaming or response.status_code != 200:
            continue
        found: list[str] = []
        if content_type.startswith("text/html"):
            parser = Links()
            parser.feed(response.content.decode())
            found = parser.links
            for action, method in parser.forms:
                target = urljoin(url, action) if action else url
                if method == "post":
                    posts.add(urlsplit(target).path)
                else:
                    found.append(target)
        elif content_type.startswith("application/json"):
            found = _json_urls(json.loads(response.content))
        for href in found:
            absolute = urljoin(url, href.replace("&amp;", "&"))
            parts = urlsplit(absolute)
            if parts.netloc not in ("", "testserver") or parts.scheme not in ("", "http"):
                continue
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if parts.path.startswith(SKIP_PREFIXES) and parts.path != "/admin/":
                continue
            if target not in seen:
                queue.append(target)
    return seen, posts


def _patterns(resolver, prefix: str = "") -> list[tuple[str, URLPattern]]:
    out = []
    for p in resolver.url_patterns:
        route = prefix + str(p.pattern)
        if isinstance(p, URLResolver):
            if route.startswith("admin/"):
                continue
            out += _patterns(p, route)
        else:
            out.append((route, p))
    return out


def parameterless_patterns() -> set[str]:
    """Names of the app's URL patterns that take no id (the admin's excluded)."""
    return {p.name for route, p in _patterns(get_resolver()) if "<" not in route and p.name}


@pytest.fixture
def world(staff_user, reviewer_user):
    """A small install with a page of every kind to visit."""
    corpus = CorpusFactory(
        name="crawl-corpus",
        languages=["en", "fr"],
        stats={"documents": 2, "sentences": 6, "gold_sentence_pairs": 0, "per_language": {"en": {}, "fr": {}}},
    )
    run = MiningRunFactory(
        src_corpus=corpus,
        name="crawl-run",
        progress=1.0,
        done=3,
        total=3,
        stats={"candidates": 3, "kept_after_filters": 2},
        timings={"write": 0.1, "embed-src": 1.0, "knn": 0.2},
    )
    for i in range(3):
        SentencePairCandidateFactory(
            run=run, score=1.3 - 0.1 * i, rank=i + 1, filter_reason="too_short" if i == 2 else ""
        )
    docs = [DocumentFactory(corpus=corpus, lang=lang, title=f"{lang} doc") for lang in ("en", "fr")]
    SentenceFactory(document=docs[0])
    doc_run = MiningRunFactory(kind=RunKind.DOCUMENT, src_corpus=corpus, name="crawl-doc-run", progress=1.0)
    DocumentPairCandidate.objects.create(run=doc_run, src=docs[0], tgt=docs[1], cosine=0.9, score=0.9, rank=1)
    calibrate = MiningRunFactory(
        kind=RunKind.CALIBRATE, src_corpus=None, tgt_corpus=None, name="calibrate en-fr", params={"method": "head"}
    )
    artefact = Artefact.objects.create(
        kind=ArtefactKind.CALIBRATION,
        name="calibration-en-fr",
        version=1,
        src_lang="en",
        tgt_lang="fr",
        params={"method": "head"},
        metrics={
            "labels": 3,
            "good": 2,
            "cross_validated": {
                "head": {
                    "ece": 0.1,
                    "brier": 0.2,
                    "log_loss": 0.5,
                    "reliability": {"confidence": [0.4, 0.8], "frequency": [0.5, 0.9], "count": [1, 2]},
                }
            },
        },
    )
    MiningRunFactory(
        kind=RunKind.APPLY_CALIBRATION,
        src_corpus=None,
        tgt_corpus=None,
        parent=run,
        name="apply",
        params={"calibration": artefact.pk},
    )
    MiningRunFactory(status=JobStatus.RUNNING, src_corpus=corpus, name="crawl-running", stage="knn", done=5, total=10)
    LanguagePairSetting.objects.create(
        src_lang="en", tgt_lang="fr", scale_key=scale_key(run), threshold=1.05, calibration=artefact
    )
    campaign = campaign_create(
        spec=CampaignSpec(name="crawl-campaign", sample_size=3), runs=[run], reviewers=[staff_user, reviewer_user]
    )
    item = campaign.items.first()
    Label.objects.create(
        campaign=campaign,
        item=item,
        reviewer=reviewer_user,
        sentence_pair=item.sentence_pair,
        verdict=Verdict.GOOD,
        mode=LabelMode.CAMPAIGN,
    )
    ImportJob.objects.create(
        corpus_name="crawl-corpus", corpus=corpus, format="tsv", status=JobStatus.SUCCEEDED, done=6, total=6
    )
    assert calibrate.pk and MiningRun.objects.count() == 5
    return campaign


def _login_and_crawl(client, username: str, password: str) -> tuple[dict[str, int], set[str]]:
    assert client.get("/accounts/login/").status_code == 200
    response = client.post("/accounts/login/", {"username": username, "password": password})
    assert response.status_code == 302, "login failed"
    return crawl(client)


def _names(urls) -> set[str]:
    names = set()
    for url in urls:
        try:
            names.add(resolve(urlsplit(url).path).url_name)
        except Resolver404:
            pass
    return names


@pytest.mark.django_db
def test_staff_reaches_every_page_without_an_error(client, world):
    seen, posts = _login_and_crawl(client, "staff", "pw-staff-123")
    failures = {url: code for url, code in seen.items() if code >= 500}
    assert not failures, f"pages answering 5xx: {failures}"
    dead = {url: code for url, code in seen.items() if code in (403, 404)}
    assert not dead, f"links to pages staff may not see or that do not exist: {dead}"
    reached = _names(seen) | _names(posts) | {"login"}
    # the API root lists POST-only endpoints as text, not links (following one would end at 405)
    post_only = {url_name for _, url_name, _, answers_get in api_root._LINKS if not answers_get}
    assert post_only == {"api-import-create", "api-judgement-create", "api-campaign-create"}
    missing = parameterless_patterns() - reached - post_only
    assert not missing, f"URL patterns without an id that no link reaches: {sorted(missing)}"
    # Pages with an id, of each kind, are reached too.
    for name in ("corpus-detail", "run-detail", "run-results", "calibration", "campaign-results", "document-pair"):
        assert name in reached, name


@pytest.mark.django_db
def test_reviewer_follows_every_link_without_a_dead_end(client, world):
    seen, _ = _login_and_crawl(client, "reviewer", "pw-reviewer-123")
    failures = {url: code for url, code in seen.items() if code >= 400}
    assert not failures, f"reviewer's links that fail or are refused: {failures}"
    reached = _names(seen)
    assert {"dashboard", "run-list", "run-detail", "campaign-list", "campaign-review"} <= reached
    assert not reached & {"run-results", "corpus-list", "feedback", "calibration", "export-list"}
