"""Language markers in URLs, and pairs of URLs that differ only by them.

Translated pages of a site usually live at URLs that differ by a language marker: a path segment (`/en/`, `/fr-fr/`,
`/english/`), a subdomain (`en.example.org`, `de-de.example.org`), a query parameter (`?lang=de`, `hl=fr`), or a
suffix of the file name (`page.fr.html`, `page_fr.html`, `page-fr.html`, `index.html.fr`). `url_markers` finds a
URL's markers and its *key*: the URL with each marker replaced by a placeholder, so that two URLs whose keys are equal
differ only by their markers. `url_pairs` lays the matching pairs of two sides out as arrays (one dict look-up per
URL), with a signal per pair:

- 1.0 (MATCH): the keys are equal, the markers differ, and the source URL's markers name the source document's
  language and the target URL's the target's;
- 0.0 otherwise (no marker, the same markers, or markers that contradict the documents' detected languages:
  a site whose `/fr/` pages hold German gets no bonus from its markers).

Pure string work: no Django, no network.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import numpy as np

PLACEHOLDER = "{L}"

_ISO_639_1 = frozenset(
    "aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee el "
    "en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io is it iu "
    "ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na "
    "nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so "
    "sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh "
    "zu".split()
)

# Three-letter codes (ISO 639-2/B and /T, 639-3) and names (English and the language's own) of the languages sites
# most often mark, all mapped to ISO 639-1.
_NAMES: dict[str, str] = {}
for _code, _words in {
    "en": "eng english",
    "fr": "fra fre french francais français",
    "de": "deu ger german deutsch",
    "es": "spa spanish espanol español castellano",
    "it": "ita italian italiano",
    "pt": "por portuguese portugues português",
    "nl": "nld dut dutch nederlands",
    "ru": "rus russian russkiy",
    "ja": "jpn japanese nihongo",
    "zh": "zho chi chinese zhongwen",
    "ko": "kor korean",
    "ar": "ara arabic",
    "pl": "pol polish polski",
    "sv": "swe swedish svenska",
    "da": "dan danish dansk",
    "fi": "fin finnish suomi",
    "nb": "nob norwegian norsk",
    "cs": "ces cze czech cesky čeština",
    "el": "ell gre greek",
    "tr": "tur turkish turkce türkçe",
    "hu": "hun hungarian magyar",
    "ro": "ron rum romanian romana română",
    "uk": "ukr ukrainian",
    "ca": "cat catalan catala català",
    "eu": "eus baq basque euskara",
    "gl": "glg galician galego",
    "vi": "vie vietnamese",
    "id": "ind indonesian",
}.items():
    for _w in _words.split():
        _NAMES[_w] = _code

# Query parameters that carry a language (their value is read as a marker).
LANG_PARAMS = frozenset({"lang", "language", "locale", "hl", "lng", "lc", "ln", "setlang", "uselang", "l", "langcode"})
# Two-letter tokens too common as something else to count as a marker in a file-name suffix (`page-it.html` is
# fine in a path segment, where a whole segment must be the code, but `-to`, `-or`, `-an` end ordinary slugs).
_SUFFIX_STOP = frozenset(
    {
        "an",
        "as",
        "at",
        "be",
        "by",
        "do",
        "go",
        "he",
        "if",
        "is",
        "me",
        "my",
        "no",
        "of",
        "on",
        "or",
        "so",
        "to",
        "up",
        "us",
        "we",
        "ie",
        "na",
        "ok",
        "os",
        "sa",
        "ts",
        "tt",
        "ha",
        "li",
    }
)
_REGION = re.compile(r"^([a-z]{2,3})(?:[-_]([a-z]{4}|[a-z]{2}|[0-9]{3}))?(?:[-_]([a-z]{2}|[0-9]{3}))?$")
_FILE_SUFFIX = re.compile(
    r"^(?P<stem>.+?)(?P<sep>[._-])(?P<mark>[a-z]{2,3}(?:[-_][a-z]{2,4})?)(?P<ext>\.[a-z0-9]{1,5})?$"
)
_EXT_THEN_LANG = re.compile(r"^(?P<stem>.+\.[a-z0-9]{1,5})\.(?P<mark>[a-z]{2}(?:[-_][a-z]{2})?)$")


def marker_language(token: str) -> str | None:
    """The ISO 639-1 code a URL token names: 'fr', 'FR', 'fr-FR', 'fr_ca', 'zh-Hant', 'fra', 'french', 'français';
    None when it names no language."""
    t = token.strip().lower()
    if not t or len(t) > 12:
        return None
    if t in _NAMES:
        return _NAMES[t]
    m = _REGION.match(t)
    if m is None:
        return None
    base = m.group(1)
    if base in _ISO_639_1:
        return "nb" if base == "no" else base
    if base in _NAMES and len(base) == 3:
        return _NAMES[base]
    return None


@dataclass(frozen=True)
class UrlMarkers:
    """A URL's language markers and its key.

    Attributes:
        key: host + path + query with each marker replaced by `{L}` (lower-case host without `www.`, no scheme, no
            fragment, query parameters sorted).
        langs: the ISO 639-1 code of each marker, in the order found (host, path, file name, query).
        places: where each marker is ('subdomain', 'path', 'suffix', 'query').
    """

    key: str
    langs: tuple[str, ...]
    places: tuple[str, ...]

    @property
    def lang(self) -> str | None:
        """The one language the markers name (None: no marker, or markers that disagree)."""
        return self.langs[0] if self.langs and len(set(self.langs)) == 1 else None


def _host_part(host: str, langs: list[str], places: list[str]) -> str:
    labels = host.lower().split(".")
    if labels and labels[0] == "www":
        labels = labels[1:]
    if len(labels) > 2:
        lang = marker_language(labels[0])
        if lang is not None:
            labels[0] = PLACEHOLDER
            langs.append(lang)
            places.append("subdomain")
    return ".".join(labels)


def _file_part(name: str, langs: list[str], places: list[str]) -> str:
    """A last path segment: `page.fr.html`, `page_fr.html`, `page-fr`, `index.html.fr`."""
    low = name.lower()
    m = _EXT_THEN_LANG.match(low)
    if m is not None and (lang := marker_language(m.group("mark"))) is not None:
        langs.append(lang)
        places.append("suffix")
        return f"{m.group('stem')}.{PLACEHOLDER}"
    m = _FILE_SUFFIX.match(low)
    if m is None:
        return name
    mark = m.group("mark")
    if m.group("sep") != "." and (mark in _SUFFIX_STOP or len(mark) > 2 and mark not in _NAMES):
        return name
    lang = marker_language(mark)
    if lang is None:
        return name
    langs.append(lang)
    places.append("suffix")
    return f"{m.group('stem')}{m.group('sep')}{PLACEHOLDER}{m.group('ext') or ''}"


def url_markers(url: str) -> UrlMarkers:
    """The language markers of `url` and its key (see the module docstring)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return UrlMarkers(url, (), ())
    langs: list[str] = []
    places: list[str] = []
    host = _host_part(parts.hostname or "", langs, places)
    segments = parts.path.split("/")
    out = []
    for i, seg in enumerate(segments):
        lang = marker_language(seg) if seg and ("." not in seg) else None
        if lang is not None and (len(seg) != 3 or seg.lower() in _NAMES):
            out.append(PLACEHOLDER)
            langs.append(lang)
            places.append("path")
        elif i == len(segments) - 1 and seg:
            out.append(_file_part(seg, langs, places))
        else:
            out.append(seg)
    query = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        lang = marker_language(value) if name.lower() in LANG_PARAMS else None
        if lang is not None:
            query.append((name.lower(), PLACEHOLDER))
            langs.append(lang)
            places.append("query")
        else:
            query.append((name, value))
    q = "&".join(f"{n}={v}" for n, v in sorted(query))
    return UrlMarkers(f"{host}{'/'.join(out)}{'?' + q if q else ''}", tuple(langs), tuple(places))


@dataclass(frozen=True)
class UrlPairs:
    """Source x target document pairs whose URLs differ only by language markers.

    Attributes:
        src, tgt: (m,) int64 document indices, sorted by (src, tgt).
        signal: (m,) float32, 1.0 where the markers name the documents' languages (MATCH), 0.0 where they
            contradict them.
    """

    src: np.ndarray
    tgt: np.ndarray
    signal: np.ndarray

    def __len__(self) -> int:
        return len(self.src)

    def matches(self) -> tuple[np.ndarray, np.ndarray]:
        """(src, tgt) of the pairs whose signal is positive."""
        ok = self.signal > 0
        return self.src[ok], self.tgt[ok]

    def lookup(self, src: np.ndarray, tgt: np.ndarray, n_tgt: int) -> np.ndarray:
        """(len(src),) float32 signal of each given pair, 0 where the pair is not listed."""
        out = np.zeros(len(src), np.float32)
        if len(self.src) == 0 or len(src) == 0:
            return out
        key = self.src * max(n_tgt, 1) + self.tgt
        want = np.asarray(src, np.int64) * max(n_tgt, 1) + np.asarray(tgt, np.int64)
        pos = np.clip(np.searchsorted(key, want), 0, len(key) - 1)
        hit = key[pos] == want
        out[hit] = self.signal[pos[hit]]
        return out


def url_pairs(
    src_urls: Sequence[str],
    tgt_urls: Sequence[str],
    src_langs: Sequence[str],
    tgt_langs: Sequence[str],
) -> UrlPairs:
    """Every (source, target) pair of documents whose URLs have equal keys and different markers.

    Args:
        src_urls, tgt_urls: each side's document URLs ('' for none).
        src_langs, tgt_langs: each document's language (ISO 639-1, or with a region: 'pt-BR').
    """
    by_key: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for j, url in enumerate(tgt_urls):
        if url:
            m = url_markers(url)
            if m.langs:
                by_key.setdefault(m.key, []).append((j, m.langs))
    src_i, tgt_i, signal = [], [], []
    for i, url in enumerate(src_urls):
        if not url:
            continue
        m = url_markers(url)
        if not m.langs or m.key not in by_key:
            continue
        s_lang = src_langs[i].split("-")[0].lower()
        for j, t_markers in by_key[m.key]:
            if t_markers == m.langs:
                continue
            t_lang = tgt_langs[j].split("-")[0].lower()
            agrees = set(m.langs) == {s_lang} and set(t_markers) == {t_lang}
            src_i.append(i)
            tgt_i.append(j)
            signal.append(1.0 if agrees else 0.0)
    src = np.asarray(src_i, np.int64)
    tgt = np.asarray(tgt_i, np.int64)
    order = np.lexsort((tgt, src))
    return UrlPairs(src[order], tgt[order], np.asarray(signal, np.float32)[order])


def describe_pair(src_url: str, tgt_url: str, src_lang: str, tgt_lang: str) -> dict[str, object]:
    """What the two URLs say about a document pair, for people: whether they differ only by language markers, the
    markers (place and language) of each, and whether those agree with the documents' languages."""
    a, b = url_markers(src_url), url_markers(tgt_url)
    same_key = bool(a.langs) and bool(b.langs) and a.key == b.key and a.langs != b.langs
    agrees = (
        same_key
        and set(a.langs) == {src_lang.split("-")[0].lower()}
        and set(b.langs) == {tgt_lang.split("-")[0].lower()}
    )
    return {
        "differ_only_by_markers": same_key,
        "agrees": agrees,
        "src_markers": [f"{p} {lang}" for p, lang in zip(a.places, a.langs, strict=True)],
        "tgt_markers": [f"{p} {lang}" for p, lang in zip(b.places, b.langs, strict=True)],
        "key": a.key if same_key else "",
    }
