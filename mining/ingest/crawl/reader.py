"""A crawl file (WARC, WARC.gz, WET) or a folder of saved HTML pages -> documents ready to store, one page each.

Per page: extraction (`pages.extract_page`), its host and site (`sites`), a language per page from py3langid over
its paragraphs (the share of each language kept where a page mixes them), and its sentences split as every other
document's (sentencex). Duplicates within the file (the same URL again, or the same text under another URL) are
skipped and counted; across files the import service checks the corpus (`mining.services.crawl_imports`).
Pages are processed in small batches (language id runs once per batch), so memory does not grow with the file.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..errors import ImportFailure
from ..text import bound_sentence, detect_languages, norm_hash, split_sentences
from .pages import DEFAULT_LIMITS, Extractor, PageLimits, PageSkip, extract_page
from .records import RawPage, Skip, warc_records
from .sites import site_of

MAX_URL_ID = 500  # Document.external_id's length
MIXED_SHARE = 0.1  # a second language with at least this share of a page's text makes it a mixed page
PAGE_SAMPLE = 1500  # characters of a page's text its language is identified on
KNOWN_MAX = 50_000  # short sentences whose language and hash are kept for the next pages (headings, captions, notes)
KNOWN_CHARS = 200  # the longest sentence kept so
_SAVED_FROM = re.compile(rb"<!--\s*saved from url=\(\d+\)(\S+?)\s*-->", re.I)
_CANONICAL = re.compile(rb"<link[^>]+rel=[\"']?canonical[\"']?[^>]*href=[\"']([^\"']+)[\"']", re.I)
_OG_URL = re.compile(rb"<meta[^>]+property=[\"']og:url[\"'][^>]*content=[\"']([^\"']+)[\"']", re.I)


@dataclass
class CrawlPage:
    """One page as it will be stored: a document of the corpus."""

    url: str
    host: str
    site: str
    lang: str
    title: str
    crawled_at: datetime | None
    sentences: list[str]
    content_hash: int
    offset: int
    metadata: dict = field(default_factory=dict)
    detected: list[str] = field(default_factory=list)  # each sentence's detected language
    hashes: list[int] = field(default_factory=list)  # each sentence's norm_hash

    @property
    def external_id(self) -> str:
        """The URL (cut, with a hash of the whole, when it is longer than a document id may be)."""
        if len(self.url) <= MAX_URL_ID:
            return self.url
        return f"{self.url[: MAX_URL_ID - 17]}#{hashlib.blake2b(self.url.encode(), digest_size=8).hexdigest()}"


@dataclass(frozen=True)
class CrawlOptions:
    extractor: Extractor = Extractor.RESILIPARSE
    limits: PageLimits = DEFAULT_LIMITS
    max_chars: int = 2000
    # Pages per batch (language id runs once per batch: 256 pages fill its vectorised chunks, 13 % less CPU than 64
    # on the bench's crawl), and the most page bytes a batch holds (memory stays flat whatever the pages' sizes).
    batch: int = 256
    batch_bytes: int = 32 << 20


def url_key(url: str) -> int:
    """A 64-bit key of the URL without its fragment (for duplicate checks)."""
    base = url.split("#", 1)[0].strip()
    return int.from_bytes(
        hashlib.blake2b(base.encode("utf-8", "replace"), digest_size=8).digest(), "little", signed=True
    )


def _languages(sentences: list[str], codes: list[str]) -> dict[str, float]:
    """Share of the page's characters in each detected language, largest first ('' = not identified)."""
    weight: dict[str, int] = {}
    for text, code in zip(sentences, codes, strict=True):
        weight[code] = weight.get(code, 0) + len(text)
    total = sum(weight.values()) or 1
    return dict(sorted(((c, w / total) for c, w in weight.items()), key=lambda cw: -cw[1]))


def _sentences(text: str, lang: str, max_chars: int, stats: dict[str, int]) -> list[str]:
    out: list[str] = []
    for s in split_sentences(text, lang):
        if len(s) <= max_chars:
            out.append(s)
            continue
        pieces = bound_sentence(s, lang, max_chars)
        if pieces is None:  # crawl text: a run-on line with no boundary is dropped and counted, not fatal
            stats["long_sentences_dropped"] = stats.get("long_sentences_dropped", 0) + 1
            continue
        stats["long_sentences_split"] = stats.get("long_sentences_split", 0) + 1
        out += pieces
    return out


class PageBuilder:
    """Turns raw pages into CrawlPages in batches: extraction, duplicate checks, language id, sentence split."""

    def __init__(self, options: CrawlOptions) -> None:
        self.options = options
        self.stats: dict[str, int] = {}
        self._urls: set[int] = set()
        self._hashes: set[int] = set()
        # (language, norm_hash) of short sentences seen: a site's headings and notes recur on many pages
        self._known: dict[str, tuple[str, int]] = {}

    def _skip(self, raw: RawPage, reason: str, detail: str = "") -> Skip:
        return Skip(reason, raw.offset, raw.url, detail)

    def build(self, raws: list[RawPage]) -> list[CrawlPage | Skip]:
        """The batch's pages (or why each was skipped), in order. Language id runs twice per batch: on each page's
        first PAGE_SAMPLE characters (the page's language, which its sentences are split in), then on each distinct
        sentence (stored as the sentence's detected language, and the page's share of each language)."""
        out: list[CrawlPage | Skip | None] = []
        ready: list[tuple[int, RawPage, str, str, int, bool]] = []
        for raw in raws:
            got = self._extract(raw)
            if isinstance(got, Skip):
                out.append(got)
                continue
            title, text, fixed, chash = got
            ready.append((len(out), raw, title, text, chash, fixed))
            out.append(None)
        first = detect_languages([item[3][:PAGE_SAMPLE] for item in ready]) if ready else []
        split = [
            _sentences(item[3], lang or "en", self.options.max_chars, self.stats)
            for item, lang in zip(ready, first, strict=True)
        ]
        known = self._analyse([s for sentences in split for s in sentences])
        for item, sentences, lang in zip(ready, split, first, strict=True):
            slot, raw, title, _, chash, fixed = item
            codes = [known[s][0] for s in sentences]
            hashes = [known[s][1] for s in sentences]
            out[slot] = self._page(raw, title, sentences, codes, hashes, chash, fixed, lang)
        if len(self._known) > KNOWN_MAX:  # bounded: memory stays flat in the file's size
            self._known = {}
        return [o for o in out if o is not None]

    def _analyse(self, sentences: list[str]) -> dict[str, tuple[str, int]]:
        """(detected language, norm_hash) of each sentence: language id once per distinct sentence of the batch,
        and not again for short ones already seen on earlier pages."""
        batch: dict[str, tuple[str, int]] = {}
        new = [s for s in dict.fromkeys(sentences) if s not in self._known]
        for s, code in zip(new, detect_languages(new) if new else [], strict=True):
            batch[s] = (code, norm_hash(s))
        for s in sentences:
            if s not in batch:
                batch[s] = self._known[s]
        self._known.update((s, v) for s, v in batch.items() if len(s) <= KNOWN_CHARS)
        return batch

    def _extract(self, raw: RawPage) -> tuple[str, str, bool, int] | Skip:
        """(title, text, charset fixed, text hash) of a new page, or why it is skipped."""
        ukey = url_key(raw.url)
        if ukey in self._urls:
            return self._skip(raw, "duplicate_url")
        try:
            if raw.text_only:
                text = raw.body.decode("utf-8", errors="replace")
                title, text, fixed = "", "\n\n".join(line.strip() for line in text.splitlines() if line.strip()), False
            else:
                page = extract_page(raw.body, raw.charset, extractor=self.options.extractor, limits=self.options.limits)
                title, text, fixed = page.title, page.text, page.charset_fixed
        except PageSkip as skip:
            return self._skip(raw, skip.reason, skip.detail)
        except Exception as exc:  # a page the extractor chokes on is one page lost, never the import
            return self._skip(raw, "extraction_failed", f"{type(exc).__name__}: {exc}"[:200])
        chash = norm_hash(text)
        if chash in self._hashes:
            return self._skip(raw, "duplicate_content")
        self._urls.add(ukey)
        self._hashes.add(chash)
        return title, text, fixed, chash

    def _page(
        self,
        raw: RawPage,
        title: str,
        sentences: list[str],
        codes: list[str],
        hashes: list[int],
        chash: int,
        fixed: bool,
        first: str,
    ) -> CrawlPage | Skip:
        """`first`: the language of the page's first PAGE_SAMPLE characters, which is the page's language (more
        reliable than a vote of its sentences, short ones being often misread); else the sentences' majority."""
        if not sentences:
            return self._skip(raw, "no_text", "no sentence in its main text")
        shares = _languages(sentences, codes)
        lang = first or next((code for code in shares if code), "")
        if not lang:
            return self._skip(raw, "unknown_language", "no language identified in its text")
        host, site = site_of(raw.url)
        meta: dict = {"offset": raw.offset}
        mixed = {c: round(s, 3) for c, s in shares.items() if c and s >= MIXED_SHARE}
        if len(mixed) > 1:
            meta["languages"] = mixed
        if fixed:
            meta["charset_fixed"] = True
        if raw.lang_hint:
            meta["lang_hint"] = raw.lang_hint
        self.stats["charset_fixed"] = self.stats.get("charset_fixed", 0) + int(fixed)
        self.stats["mixed_language_pages"] = self.stats.get("mixed_language_pages", 0) + int(len(mixed) > 1)
        return CrawlPage(raw.url, host, site, lang, title, raw.date, sentences, chash, raw.offset, meta, codes, hashes)


def _batched(events: Iterable[RawPage | Skip | int], builder: PageBuilder) -> Iterator[CrawlPage | Skip | int]:
    batch: list[RawPage] = []
    held = 0
    for event in events:
        if isinstance(event, RawPage):
            batch.append(event)
            held += len(event.body)
            if len(batch) >= builder.options.batch or held >= builder.options.batch_bytes:
                yield from builder.build(batch)
                batch, held = [], 0
        else:
            yield event
    if batch:
        yield from builder.build(batch)


def read_crawl(
    path: str, options: CrawlOptions, builder: PageBuilder | None = None
) -> Iterator[CrawlPage | Skip | int]:
    """The pages of one WARC / WARC.gz / WET file or folder of .html pages, the skips, and byte offsets reached."""
    builder = builder or PageBuilder(options)
    events = html_folder(path, options.limits) if os.path.isdir(path) else warc_records(path, options.limits)
    yield from _batched(events, builder)


def _saved_url(head: bytes, rel: Path) -> str:
    for pattern in (_SAVED_FROM, _CANONICAL, _OG_URL):
        m = pattern.search(head)
        if m:
            return m.group(1).decode("utf-8", "replace").strip()
    first = rel.parts[0] if rel.parts else ""
    if "." in first and len(rel.parts) > 1:  # wget -r's layout: host/path
        return "http://" + rel.as_posix()
    return "file:///" + rel.as_posix()


def html_folder(root: str, limits: PageLimits = DEFAULT_LIMITS) -> Iterator[RawPage | Skip | int]:
    """Saved pages (*.html, *.htm, any depth) of a folder, in name order; the URL from the page ('saved from url'
    comment, canonical link, og:url), else from the path (a wget mirror's host/path), the date from the file's time.
    The 'offset' of each is its number in that order."""
    files = sorted(p for p in Path(root).rglob("*") if p.is_file() and p.suffix.lower() in (".html", ".htm"))
    if not files:
        raise ImportFailure("no .html or .htm file in the folder", path=root)
    done = 0
    for n, path in enumerate(files):
        rel = path.relative_to(root)
        size = path.stat().st_size
        if size > limits.max_bytes:
            yield Skip("too_large", n, rel.as_posix(), f"{size:,} bytes, over the {limits.max_bytes:,} a page may have")
        else:
            body = path.read_bytes()
            date = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
            yield RawPage(_saved_url(body[:4096], rel), n, date, body, None)
        done += size
        yield done
