"""WARC records streamed with FastWARC, one at a time, never a whole file in memory; damage skipped, not fatal.

FastWARC stops at the first damaged record (a mis-sized record, garbage between records, a corrupt or truncated gzip
member) and at a truncated final gzip member it stops silently. So the reader notes where it was, looks for the next
record boundary after the damage (the next `WARC/1.` line of a plain file, or the next gzip member that starts a WARC
record), and iterates again from there, counting what it skipped with its offset. Only a file in which no record can
be read at all fails (`ImportFailure`).

Events: `RawPage` (an HTML response, a `resource` record of HTML, or a WET `conversion` record of text) or `Skip`.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

from ..errors import ImportFailure
from .pages import DEFAULT_LIMITS, PageLimits

_GZ_MAGIC = b"\x1f\x8b\x08"
_WARC_LINE = b"WARC/1."
_SWALLOWED = (b"\r\nWARC/1.0\r\nWARC-", b"\r\nWARC/1.1\r\nWARC-", b"\nWARC/1.0\r\nWARC-Type")
_HTML_TYPES = ("text/html", "application/xhtml+xml")


@dataclass(frozen=True)
class RawPage:
    """One page's bytes as crawled. `text_only`: a WET conversion record (plain text, nothing to extract)."""

    url: str
    offset: int
    date: datetime | None
    body: bytes
    charset: str | None
    text_only: bool = False
    lang_hint: str = ""


@dataclass(frozen=True)
class Skip:
    """A record or page that is not imported: the counter it goes to, where it was, and what was seen."""

    reason: str
    offset: int
    url: str = ""
    detail: str = ""


def _warc_date(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _content_type(value: str | None) -> tuple[str, str | None]:
    """('text/html', 'utf-8') from a Content-Type header value."""
    if not value:
        return "", None
    parts = [p.strip() for p in value.split(";")]
    charset = None
    for p in parts[1:]:
        key, _, val = p.partition("=")
        if key.strip().lower() == "charset" and val.strip():
            charset = val.strip().strip("\"'")
    return parts[0].lower(), charset


def _gzip_member_at(fh, offset: int) -> bool:
    """True when a gzip member starting at `offset` decompresses to the start of a WARC record."""
    fh.seek(offset)
    try:
        head = zlib.decompressobj(31).decompress(fh.read(8192), 64)
    except zlib.error:
        return False
    return head.startswith(_WARC_LINE)


def next_boundary(fh, start: int, gz: bool, *, chunk: int = 1 << 20) -> int | None:
    """The offset of the first record boundary at or after `start`: a gzip member holding a WARC record (gz), or a
    `WARC/1.` line (plain); None when there is none."""
    magic = _GZ_MAGIC if gz else _WARC_LINE
    pos = start
    while True:
        fh.seek(pos)
        block = fh.read(chunk + len(magic))
        if not block:
            return None
        i = block.find(magic)
        while i != -1 and i < chunk + 1:
            at = pos + i
            if gz and _gzip_member_at(fh, at):
                return at
            if not gz and (at == 0 or _byte_before(fh, at) == b"\n"):
                return at
            i = block.find(magic, i + 1)
        if len(block) <= chunk:
            return None
        pos += chunk


def member_end(fh, start: int, *, chunk: int = 1 << 16) -> int | None:
    """Where the gzip member starting at `start` ends (None: it does not decompress to its end)."""
    fh.seek(start)
    d = zlib.decompressobj(31)
    fed = 0
    try:
        while not d.eof:
            block = fh.read(chunk)
            if not block:
                return None
            fed += len(block)
            d.decompress(block, 1 << 16)
            while d.unconsumed_tail and not d.eof:  # bounded output: a member is never held whole
                d.decompress(d.unconsumed_tail, 1 << 16)
    except zlib.error:
        return None
    return start + fed - len(d.unused_data)


def _byte_before(fh, at: int) -> bytes:
    fh.seek(at - 1)
    return fh.read(1)


def _event(rec, pos: int, limits: PageLimits) -> RawPage | Skip | None:
    """What one record becomes (None: a record that is not a page at all, counted by the caller)."""
    rtype = rec.record_type.name if hasattr(rec.record_type, "name") else str(rec.record_type).split(".")[-1]
    url = rec.headers.get("WARC-Target-URI") or ""
    if rec.headers.get("Content-Length") is None:
        return Skip("truncated_record", pos, url, "the record's header is cut off")
    date = _warc_date(rec.headers.get("WARC-Date"))
    if rtype == "conversion":
        return _read_body(
            rec,
            pos,
            url,
            limits,
            lambda body: RawPage(
                url, pos, date, body, "utf-8", True, rec.headers.get("WARC-Identified-Content-Language") or ""
            ),
        )
    if rtype not in ("response", "resource"):
        return None
    if rtype == "resource":
        ctype, charset = _content_type(rec.headers.get("Content-Type"))
    else:
        try:
            rec.parse_http()
        except OSError as exc:
            return Skip("corrupt_record", pos, url, f"bad HTTP headers ({exc})")
        http = rec.http_headers
        if http is None:
            return Skip("corrupt_record", pos, url, "no HTTP headers")
        status = http.status_code or 0
        if status < 100:
            return Skip("corrupt_record", pos, url, "no valid HTTP status line")
        if 300 <= status < 400:
            return Skip("redirect", pos, url, f"HTTP {status} to {http.get('Location') or '?'}")
        if status != 200:
            return Skip("http_error", pos, url, f"HTTP {status}")
        ctype, charset = _content_type(http.get("Content-Type"))
    if url.lower().split("?")[0].endswith("/robots.txt"):
        return Skip("robots_txt", pos, url)
    if ctype and ctype not in _HTML_TYPES:
        return Skip("not_html", pos, url, ctype)
    return _read_body(rec, pos, url, limits, lambda body: RawPage(url, pos, date, body, charset))


def _read_body(rec, pos: int, url: str, limits: PageLimits, make) -> RawPage | Skip:
    expected = rec.content_length
    if expected > limits.max_bytes:
        return Skip("too_large", pos, url, f"{expected:,} bytes, over the {limits.max_bytes:,} a page may have")
    body = rec.reader.read()
    if any(mark in body for mark in _SWALLOWED):
        return Skip("corrupt_record", pos, url, "its Content-Length runs into the next record")
    if len(body) < expected:
        return Skip("truncated_record", pos, url, f"{len(body):,} of {expected:,} bytes: the record is cut off")
    return make(body)


def _damage(fh, gz: bool, last: int, start: int, error: str) -> Skip:
    """The skip for what FastWARC could not read after the record at `last`: in a gzip file, the member after it
    (`truncated_gzip` when that member does not decompress to its end, else `corrupt_record`)."""
    if gz:
        at = member_end(fh, last) if last >= start else start
        at = at if at is not None else max(last, start)
        if member_end(fh, at) is None:
            return Skip("truncated_gzip", at, "", f"a gzip member that does not decompress ({error})")
        return Skip("corrupt_record", at, "", f"a record that cannot be read ({error})")
    where = f"after the record at offset {last:,}" if last >= start else "at the start"
    return Skip("corrupt_record", max(last, start), "", f"unreadable bytes {where} ({error})")


def warc_records(path: str, limits: PageLimits = DEFAULT_LIMITS) -> Iterator[RawPage | Skip | int]:
    """Pages and skips of a WARC, WARC.gz or WET file, in file order; between them, ints: the byte offset reached
    (for progress). Non-page records (request, metadata, warcinfo, revisit) are yielded as Skip('not_page')."""
    from fastwarc.warc import ArchiveIterator

    size = os.path.getsize(path)
    if size == 0:
        raise ImportFailure("the file is empty", path=path)
    read_any = False
    first_error = ""
    with open(path, "rb") as fh:
        gz = fh.read(3) == _GZ_MAGIC
        start: int | None = 0
        while start is not None and start < size:
            fh.seek(start)
            last = start - 1
            resume: int | None = None
            damaged: Skip | None = None
            try:
                for rec in ArchiveIterator(fh, parse_http=False, fsspec_args=False):
                    pos = rec.stream_pos if rec.stream_pos >= start else start + rec.stream_pos
                    last, read_any = pos, True
                    event = _event(rec, pos, limits)
                    if isinstance(event, Skip) and event.reason in ("corrupt_record", "truncated_record"):
                        damaged, resume = event, pos + 1
                        break
                    yield event or Skip("not_page", pos, rec.headers.get("WARC-Target-URI") or "")
                    yield pos
                else:
                    if gz and last >= start:  # FastWARC ends silently at a truncated member: did it stop early?
                        end = member_end(fh, last)
                        if end is not None and end < size:
                            yield Skip("truncated_gzip", end, "", f"{size - end:,} bytes at the end do not decompress")
                            resume = end + 1
            except OSError as exc:
                first_error = first_error or str(exc)
                skip = _damage(fh, gz, last, start, str(exc))
                yield skip
                resume = max(skip.offset, last) + 1
            if damaged is not None:  # in a gzip file, a member cut short reads as a broken record: say which
                if gz and member_end(fh, damaged.offset) is None:
                    damaged = Skip("truncated_gzip", damaged.offset, "", "a gzip member that does not decompress")
                yield damaged
            start = next_boundary(fh, resume, gz) if resume is not None else None
    if not read_any:
        raise ImportFailure(
            f"no WARC record could be read ({first_error or 'not a WARC file'}): is it a WARC, WARC.gz or WET file?",
            path=path,
        )
    yield size
