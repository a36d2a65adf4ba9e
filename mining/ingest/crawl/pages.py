"""One crawled page's bytes -> its title and main text: binary and nesting-bomb checks, charset detection for pages
that lie about or omit their encoding, and boilerplate removal with resiliparse (the default) or trafilatura.

Measured on this project's bench (bench/crawl_import.py, docs/BENCHMARKS.md): resiliparse extracts ~20x faster than
trafilatura on the same pages, and the document matching on what each extracts is compared there too.
"""

from __future__ import annotations

import codecs
import enum
import re
from dataclasses import dataclass

# Magic numbers of files that are not text, whatever their Content-Type says.
_BINARY_MAGIC = (
    b"\x89PNG",
    b"GIF8",
    b"\xff\xd8\xff",
    b"%PDF",
    b"PK\x03\x04",
    b"\x1f\x8b",
    b"\x00\x00\x01\x00",
    b"RIFF",
)
_TAG = re.compile(rb"<(/?)([a-zA-Z][a-zA-Z0-9]{0,15})")
# Elements that never nest (void) or that the HTML parser closes by itself, so they do not deepen the tree.
_FLAT = frozenset(
    b"br img meta link input hr area base col embed source track wbr param p li td th tr dt dd option".split()
)
_UTF8_MULTI = re.compile(rb"[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}")
_BAD_CHARS = re.compile("[\ufffd\x80-\x9f]")  # replaced bytes, and C1 controls (what junk bytes decode to)
_CONTROL_BYTES = bytes([*range(1, 9), *range(14, 32)])
_DROP = dict.fromkeys([*range(0, 9), 11, 12, *range(14, 32), 127, 0x200B])  # controls and zero-width spaces
_DROP_RE = re.compile("[" + "".join(f"\\x{c:02x}" if c < 256 else f"\\u{c:04x}" for c in _DROP) + "]")
_BLANKS = re.compile(r"\n{3,}")


class Extractor(enum.Enum):
    """Which library extracts a page's main text."""

    RESILIPARSE = "resiliparse"
    TRAFILATURA = "trafilatura"


@dataclass(frozen=True)
class PageLimits:
    """What a page may be before it is skipped.

    Attributes:
        max_bytes: the largest body read (a longer page is skipped as `too_large`, its bytes never read).
        max_depth: the deepest element nesting extracted (resiliparse's main-content pass grows with depth squared:
            20,000 nested divs took 17 s); deeper pages are skipped as `nesting_bomb`.
        max_bad_share: the largest share of undecodable characters a page may have (else `invalid_bytes`).
    """

    max_bytes: int = 8 << 20
    max_depth: int = 1000
    max_bad_share: float = 0.02


DEFAULT_LIMITS = PageLimits()


class PageSkip(Exception):
    """A page that is not imported: `reason` is the counter it goes to, `detail` says what was seen."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason, self.detail = reason, detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class Extracted:
    """A page's title and main text (paragraphs separated by blank lines), and how its bytes were decoded."""

    title: str
    text: str
    encoding: str
    charset_fixed: bool  # the declared charset was missing or wrong


def looks_binary(body: bytes) -> str:
    """Why `body` is not text ('' when it may be): a known file signature, or NUL / control bytes in its start."""
    head = body[:4096]
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return ""
    for magic in _BINARY_MAGIC:
        if head.startswith(magic):
            return f"starts with the signature {magic!r}"
    if b"\x00" in head:
        return "NUL bytes in its first 4 KB"
    controls = len(head) - len(head.translate(None, _CONTROL_BYTES))
    if head and controls / len(head) > 0.05:
        return f"{controls} control bytes in its first {len(head)}"
    return ""


def nesting_depth(body: bytes, limit: int) -> int:
    """The deepest element nesting of the page (elements that cannot nest not counted), scanned only when the page has
    more opening tags than `limit` (fewer cannot nest deeper); stops counting past `limit`."""
    opening = body.count(b"<") - body.count(b"</") - body.count(b"<!")  # at least the opening tags
    if opening <= limit:  # a page is never nested deeper than it has opening tags
        return 0
    depth = deepest = 0
    for m in _TAG.finditer(body):  # XHTML's self-closed elements (<br/>, <img/>, <meta/>) are all in _FLAT
        if m.group(1):
            depth = max(0, depth - 1)
        elif m.group(2).lower() not in _FLAT:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    break
    return deepest


def _codec(name: str | None) -> str | None:
    if not name:
        return None
    try:
        return codecs.lookup(name.strip().strip("\"'")).name
    except LookupError:
        return None


def decode_page(body: bytes, declared: str | None, limits: PageLimits = DEFAULT_LIMITS) -> tuple[str, str, bool]:
    """(text, encoding, whether the declared charset was missing or wrong).

    A BOM wins; then strict UTF-8 (a page that declares latin-1 but is UTF-8 is read as UTF-8); then the declared
    charset (HTTP header, else the page's meta tag) if it decodes strictly; then, for bytes that are mostly valid
    UTF-8, UTF-8 with the damaged bytes replaced, else uchardet's guess (resiliparse). A page whose text then has
    more than `limits.max_bad_share` undecodable or C1 control characters is PageSkip('invalid_bytes').
    """
    from resiliparse.parse.encoding import detect_encoding

    boms = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
    for bom, enc in boms:
        if body.startswith(bom):
            return _checked(body[len(bom) :].decode(enc, errors="replace"), enc, False, limits)
    said = _codec(declared) or _codec(detect_encoding(body[:2048], from_html_meta=True, max_len=2048))
    try:
        text = body.decode("utf-8")
        return text, "utf-8", said not in (None, "utf-8", "ascii") and not body.isascii()
    except UnicodeDecodeError:
        pass
    if said and said != "utf-8":
        try:
            return _checked(body.decode(said), said, False, limits)
        except UnicodeDecodeError:
            pass
    valid = sum(len(m) for m in _UTF8_MULTI.findall(body))
    high = len(body) - len(body.translate(None, bytes(range(128, 256))))
    if valid > high - valid:  # UTF-8 with some damaged bytes
        return _checked(body.decode("utf-8", errors="replace"), "utf-8", said != "utf-8", limits)
    guess = _codec(detect_encoding(body, html5_compatible=True)) or "windows-1252"
    return _checked(body.decode(guess, errors="replace"), guess, True, limits)


def _checked(text: str, encoding: str, fixed: bool, limits: PageLimits) -> tuple[str, str, bool]:
    bad = len(_BAD_CHARS.findall(text))
    if text and bad / len(text) > limits.max_bad_share:
        raise PageSkip("invalid_bytes", f"{bad:,} of {len(text):,} characters undecodable as {encoding}")
    return text, encoding, fixed


def _clean(text: str) -> str:
    """Collapse runs of white space inside lines, drop control characters (the database cannot store NUL), strip
    lines; blank lines (paragraph breaks) are kept, at most one in a row."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _DROP_RE.search(text):  # rare: str.translate is slow on long non-ASCII text, a search that fails is not
        text = text.translate(_DROP)
    return _BLANKS.sub("\n\n", "\n".join(" ".join(line.split()) for line in text.split("\n"))).strip()


def extract_page(
    body: bytes,
    declared: str | None,
    *,
    extractor: Extractor = Extractor.RESILIPARSE,
    limits: PageLimits = DEFAULT_LIMITS,
) -> Extracted:
    """Title and main text of an HTML page; PageSkip for binary content, a nesting bomb, undecodable or empty text.

    `declared`: the charset the HTTP header named (None: none; the page's meta tag is read then)."""
    why = looks_binary(body)
    if why:
        raise PageSkip("binary", why)
    depth = nesting_depth(body, limits.max_depth)
    if depth > limits.max_depth:
        raise PageSkip("nesting_bomb", f"elements nested more than {limits.max_depth} deep")
    html, encoding, fixed = decode_page(body, declared, limits)
    if extractor is Extractor.TRAFILATURA:
        title, text = _trafilatura(html)
    else:
        title, text = _resiliparse(html)
    text = _clean(text)
    if not text:
        raise PageSkip("no_text", "no main text after boilerplate removal")
    return Extracted(_clean(title).replace("\n", " ")[:1000], text, encoding, fixed)


def _resiliparse(html: str) -> tuple[str, str]:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(html)
    text = extract_plain_text(tree, main_content=True, alt_texts=False, list_bullets=False)
    return tree.title or "", text


def _trafilatura(html: str) -> tuple[str, str]:
    import trafilatura

    doc = trafilatura.bare_extraction(html, with_metadata=True, include_comments=False, favor_precision=False)
    if doc is None:
        return "", ""
    # one paragraph per line in trafilatura's output: blank lines make them paragraphs for the sentence splitter
    return doc.title or "", "\n\n".join((doc.text or "").splitlines())
