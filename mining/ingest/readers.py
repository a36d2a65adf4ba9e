"""Streaming readers, one per format. Aligned formats yield `Pair`s, document formats yield `Doc`s.

Every reader decodes strictly and raises `ImportFailure` naming the file and the line or element at fault. None of
them holds a whole file in memory (PO files excepted: polib parses a catalogue whole). A file that ends inside a
record (a TSV or Moses line without its line break, a JSONL record, a TMX element, a PO string or entry) is an
error, never a shorter record. Aligned readers refuse a segment over `max_chars` characters, naming where it is: a
pair cannot be split without guessing which piece translates which.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from .errors import ImportFailure, decode_line, too_long
from .languages import check_language

CUT_OFF = "it looks cut off; if it is complete, end the file with a line break"


@dataclass(frozen=True)
class Pair:
    """One aligned sentence pair; `src_key` (optional) identifies a repeated source sentence (PO msgctxt+msgid)."""

    src: str
    tgt: str
    src_key: str | None = None


@dataclass
class Doc:
    """A document: either `sentences` (pre-split) or `text` (split on import); `path` and `line` say where it was
    read, for error messages."""

    external_id: str
    lang: str
    title: str = ""
    url: str = ""
    text: str | None = None
    sentences: list[str] | None = None
    metadata: dict = field(default_factory=dict)
    path: str | None = None
    line: int | None = None


def _raw_lines(path: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, decoded line without its line break, whether a line break ended it) of a UTF-8 file; a UTF-8
    BOM on line 1 is dropped."""
    with open(path, "rb") as fh:
        for no, raw in enumerate(fh, start=1):
            if no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield no, decode_line(raw.rstrip(b"\r\n"), path, no), raw.endswith(b"\n")


def _lines(path: str, *, max_bytes: int | None = None, complete: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, decoded line without its line break) of a UTF-8 file, a UTF-8 BOM on line 1 dropped. A line over
    `max_bytes` is refused as soon as that many bytes are read (never held whole). With `complete`, a last line with
    text but no line break is an error: in a line-based format the file was most likely cut inside that record."""
    with open(path, "rb") as fh:
        readline = fh.readline
        limit = max_bytes + 1 if max_bytes else -1
        no = 0
        while raw := readline(limit):
            no += 1
            if no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if raw[-1:] != b"\n":
                if max_bytes and len(raw) > max_bytes:
                    _line_too_long(path, no, max_bytes)
                if complete and raw.strip():
                    decode_line(raw, path, no)  # bad bytes are the first thing to report
                    raise ImportFailure(f"the file ends inside this line: {CUT_OFF}", path=path, line=no)
            yield no, decode_line(raw.rstrip(b"\r\n"), path, no)


def _line_too_long(path: str, no: int, max_bytes: int) -> NoReturn:
    raise ImportFailure(
        f"the line is longer than {max_bytes:,} bytes, more than its sentences may hold (PCAPP_MAX_SENTENCE_CHARS)",
        path=path,
        line=no,
    )


def _line_bytes(max_chars: int | None, columns: int) -> int | None:
    """Most bytes a line of `columns` sentences of at most `max_chars` characters can take in UTF-8 (4 bytes per
    character at most), with the separators, a CRLF and a BOM."""
    return 4 * columns * max_chars + columns + 8 if max_chars else None


def _check_length(text: str, what: str, max_chars: int | None, *, path: str, line=None, element=None) -> None:
    if max_chars and len(text) > max_chars:
        raise ImportFailure(
            too_long(what, len(text), max_chars) + ": a pair cannot be split without guessing which part translates "
            "which, so split it in the file or raise the limit",
            path=path,
            line=line,
            element=element,
        )


def read_tsv(path: str, *, header: bool | None = None, max_chars: int | None = None) -> Iterator[Pair]:
    """Two tab-separated columns per line; a first line of `src<TAB>tgt`-like column names is skipped when `header`
    is True (None: skipped only when it reads 'source/target' or two language codes)."""
    for no, line in _lines(path, max_bytes=_line_bytes(max_chars, 2), complete=True):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise ImportFailure(f"expected 2 tab-separated columns, found {len(cols)}", path=path, line=no)
        if no == 1 and (header or (header is None and _looks_like_header(cols))):
            continue
        if max_chars and (len(cols[0]) > max_chars or len(cols[1]) > max_chars):
            _check_length(cols[0], "the source text", max_chars, path=path, line=no)
            _check_length(cols[1], "the target text", max_chars, path=path, line=no)
        yield Pair(cols[0], cols[1])


def _looks_like_header(cols: list[str]) -> bool:
    names = {c.strip().lower() for c in cols}
    return names <= {"source", "target", "src", "tgt", "source_text", "target_text"} or all(
        len(c.strip()) in (2, 3) and c.strip().isalpha() and c.strip().islower() for c in cols
    )


def read_moses(src_path: str, tgt_path: str, *, max_chars: int | None = None) -> Iterator[Pair]:
    """Two files with one sentence per line, line i of one translating line i of the other."""
    max_bytes = _line_bytes(max_chars, 1)
    src_lines = _lines(src_path, max_bytes=max_bytes, complete=True)
    tgt_lines = _lines(tgt_path, max_bytes=max_bytes, complete=True)
    n = 0
    rest_src = rest_tgt = 0
    for no, s in src_lines:
        t = next(tgt_lines, None)
        if t is None:
            rest_src = 1
            break
        n += 1
        if max_chars and (len(s) > max_chars or len(t[1]) > max_chars):
            _check_length(s, "the sentence", max_chars, path=src_path, line=no)
            _check_length(t[1], "the sentence", max_chars, path=tgt_path, line=no)
        yield Pair(s, t[1])
    rest_src += sum(1 for _ in src_lines)
    rest_tgt = sum(1 for _ in tgt_lines)
    if rest_src or rest_tgt:
        raise ImportFailure(
            f"Moses files differ in length: '{src_path}' has {n + rest_src} lines, '{tgt_path}' has {n + rest_tgt}"
        )


def read_tmx(path: str, src_lang: str, tgt_lang: str, *, max_chars: int | None = None) -> Iterator[Pair]:
    """TMX 1.4 translation units (<tu>) with a <tuv> in each of the two languages, streamed with iterparse."""
    xml_lang = "{http://www.w3.org/XML/1998/namespace}lang"
    n_tu = 0
    parent: ET.Element | None = None
    try:
        for event, elem in ET.iterparse(path, events=("start", "end")):
            if event == "start":
                if elem.tag == "body":
                    parent = elem
                continue
            if elem.tag != "tu":
                continue
            n_tu += 1
            segs: dict[str, str] = {}
            for tuv in elem.findall("tuv"):
                lang = tuv.get(xml_lang) or tuv.get("lang")
                seg = tuv.find("seg")
                if lang is None or seg is None:
                    raise ImportFailure(
                        "a <tuv> lacks xml:lang or a <seg>", path=path, element=f"<tu> #{n_tu}{_tuid(elem)}"
                    )
                segs[lang.lower()] = "".join(seg.itertext())
            src, tgt = _pick(segs, src_lang), _pick(segs, tgt_lang)
            if src is None or tgt is None:
                raise ImportFailure(
                    f"needs <tuv> in '{src_lang}' and '{tgt_lang}', has {sorted(segs)}",
                    path=path,
                    element=f"<tu> #{n_tu}{_tuid(elem)}",
                )
            if max_chars and (len(src) > max_chars or len(tgt) > max_chars):
                where = f"<tu> #{n_tu}{_tuid(elem)}"
                _check_length(src, f"the '{src_lang}' segment", max_chars, path=path, element=where)
                _check_length(tgt, f"the '{tgt_lang}' segment", max_chars, path=path, element=where)
            yield Pair(src, tgt)
            # Drop the finished unit from <body> too, so memory stays flat however many units the file holds.
            elem.clear()
            if parent is not None:
                parent.clear()
    except ET.ParseError as exc:
        line, col = exc.position
        cut = " (the file ends inside an element: it looks cut off)" if exc.code in _XML_CUT_OFF else ""
        raise ImportFailure(
            f"malformed TMX at column {col + 1} ({exc.msg if hasattr(exc, 'msg') else exc}){cut}",
            path=path,
            line=line,
            element=f"after <tu> #{n_tu}",
        ) from None


# expat's codes for input that ends too soon: no element found (the root is not closed), unclosed token, partial
# character, unclosed CDATA section
_XML_CUT_OFF = {3, 5, 6, 20}


def _tuid(elem: ET.Element) -> str:
    return f" (tuid '{elem.get('tuid')}')" if elem.get("tuid") else ""


def _pick(segs: dict[str, str], lang: str) -> str | None:
    lang = lang.lower()
    if lang in segs:
        return segs[lang]
    base = lang.replace("_", "-").split("-")[0]
    matches = [v for k, v in segs.items() if k.replace("_", "-").split("-")[0] == base]
    return matches[0] if len(matches) == 1 else None


def read_po(path: str, stats: dict, *, max_chars: int | None = None) -> Iterator[Pair]:
    """msgid/msgstr pairs of a gettext catalogue; the header, fuzzy, obsolete and untranslated entries are skipped
    (and counted). For plural entries msgid is paired with msgstr[0]. The file's syntax is checked line by line
    first, as polib reads a string cut off at the end of the file as if it were closed ("Bonjour le mond")."""
    import polib

    check_po_syntax(path)
    try:
        catalogue = polib.pofile(path, encoding="utf-8")
    except (OSError, ValueError, KeyError, IndexError, UnicodeError) as exc:
        reason = str(exc).replace(path, os.path.basename(path))
        raise ImportFailure(f"not a valid PO file ({reason})", path=path) from None
    for entry in catalogue:
        if entry.obsolete or "fuzzy" in entry.flags:
            stats["po_fuzzy_or_obsolete"] = stats.get("po_fuzzy_or_obsolete", 0) + 1
            continue
        tgt = entry.msgstr or (entry.msgstr_plural.get(0) if entry.msgstr_plural else "")
        if not entry.msgid or not tgt:
            stats["po_untranslated"] = stats.get("po_untranslated", 0) + 1
            continue
        if max_chars and (len(entry.msgid) > max_chars or len(tgt) > max_chars):
            _check_length(entry.msgid, "the msgid", max_chars, path=path, line=entry.linenum)
            _check_length(tgt, "the msgstr", max_chars, path=path, line=entry.linenum)
        key = f"{entry.msgctxt or ''}\x04{entry.msgid}"
        yield Pair(entry.msgid, tgt, src_key=key)


_PO_STRING = r'"(?:[^"\\]|\\.)*"'
_PO_LINE = re.compile(rf"\s*(?:(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?)\s*)?{_PO_STRING}(?:\s*{_PO_STRING})*\s*")


def _unclosed_string(text: str) -> bool:
    """Whether `text` ends inside a double-quoted string (backslash escapes honoured)."""
    inside = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and inside:
            escaped = True
        elif ch == '"':
            inside = not inside
    return inside


def check_po_syntax(path: str) -> None:
    """Every line of a PO file is blank, a comment, or an optional keyword and closed quoted strings, and every
    entry with a msgid has a msgstr. A string or entry cut off by the end of the file is named as such."""
    lines = list(_lines(path))
    last = max((no for no, line in lines if line.strip()), default=0)
    entry_line: int | None = None  # where the current entry's msgctxt/msgid is
    has_msgstr = False
    previous = ""
    for no, line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            body = text.lstrip("#~|").strip() if text.startswith(("#~", "#|")) else ""
            if body and not _PO_LINE.fullmatch(body):
                _po_line_error(path, no, body, no == last)
            continue
        match = _PO_LINE.fullmatch(line)
        if match is None:
            _po_line_error(path, no, line, no == last)
        keyword = match.group(1)
        if keyword == "msgctxt" or (keyword == "msgid" and previous != "msgctxt"):
            if entry_line is not None and not has_msgstr:
                raise ImportFailure("this entry has a msgid but no msgstr", path=path, line=entry_line)
            entry_line, has_msgstr = no, False
        elif keyword and keyword.startswith("msgstr"):
            has_msgstr = True
        if keyword:
            previous = keyword
    if entry_line is not None and not has_msgstr:
        raise ImportFailure(
            "the file ends inside the entry that starts on this line (a msgid without msgstr): it looks cut off",
            path=path,
            line=entry_line,
        )


def _po_line_error(path: str, no: int, text: str, is_last: bool) -> NoReturn:
    if _unclosed_string(text):
        reason = (
            "the file ends inside a quoted string on this line: it looks cut off"
            if is_last
            else "a quoted string is not closed on this line"
        )
    else:
        reason = "not a PO line: expected a keyword (msgid, msgstr, ...) with quoted strings, a string, or a comment"
    raise ImportFailure(reason, path=path, line=no)


def read_jsonl(path: str) -> Iterator[Doc]:
    """One JSON document per line: {"id", "lang", "title", "url", "text"} or with a pre-split "sentences" list."""
    for no, line, ended in _raw_lines(path):
        if not line.strip():
            continue
        obj = _json_record(line, path, no, ended)
        if not isinstance(obj, dict):
            raise ImportFailure("expected a JSON object", path=path, line=no)
        for required in ("id", "lang"):
            if required not in obj:
                raise ImportFailure(f"missing field '{required}'", path=path, line=no)
        sentences = obj.get("sentences")
        if sentences is not None and not (isinstance(sentences, list) and all(isinstance(s, str) for s in sentences)):
            raise ImportFailure("'sentences' must be a list of strings", path=path, line=no)
        if sentences is None and not isinstance(obj.get("text", ""), str):
            raise ImportFailure("'text' must be a string", path=path, line=no)
        lang = check_language(str(obj["lang"]), path=f"{path}, line {no}")
        meta = {k: v for k, v in obj.items() if k not in {"id", "lang", "title", "url", "text", "sentences"}}
        yield Doc(
            str(obj["id"]),
            lang,
            str(obj.get("title") or ""),
            str(obj.get("url") or ""),
            text=obj.get("text") if sentences is None else None,
            sentences=sentences,
            metadata=meta,
            path=path,
            line=no,
        )


def _json_record(line: str, path: str, no: int, ended: bool):
    """One parsed JSONL record; anything the database could not store as given (NaN, infinities, NUL characters,
    lone surrogates) is an error naming the line, and so is a last record the end of the file cuts off."""
    try:
        obj = json.loads(line, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        at_end = exc.pos >= len(line.rstrip()) or exc.msg.startswith("Unterminated string")
        if not ended and at_end:
            raise ImportFailure(
                "the file ends inside this record (its JSON is incomplete): it looks cut off", path=path, line=no
            ) from None
        raise ImportFailure(f"not valid JSON ({exc.msg} at column {exc.colno})", path=path, line=no) from None
    except (ValueError, RecursionError) as exc:  # NaN, 1e999, an integer of thousands of digits, deep nesting
        raise ImportFailure(f"not valid JSON here ({exc or type(exc).__name__})", path=path, line=no) from None
    if "\\u" in line:  # escapes can make what raw UTF-8 cannot: NUL characters and lone surrogates
        try:
            bad = _unstorable(obj)
        except RecursionError:
            raise ImportFailure("the record is nested too deeply", path=path, line=no) from None
        if bad:
            raise ImportFailure(f"a string holds {bad}, which the database cannot store", path=path, line=no)
    return obj


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _unstorable(value) -> str:
    """'' when every string in a parsed JSON value can be stored, else what cannot."""
    if isinstance(value, str):
        if "\x00" in value:
            return "a NUL character (\\u0000)"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "a lone surrogate (\\ud800-\\udfff)"
        return ""
    if isinstance(value, dict):
        return next((bad for item in value.items() for bad in map(_unstorable, item) if bad), "")
    if isinstance(value, list):
        return next((bad for bad in map(_unstorable, value) if bad), "")
    return ""


def read_folder(root: str) -> Iterator[Doc]:
    """Plain-text documents; the language comes from a first-level folder (en/intro.txt) or a file suffix
    (intro.en.txt). Translations share the rest of the path, which becomes the document id."""
    base = Path(root)
    if not base.is_dir():
        raise ImportFailure("not a folder", path=root)
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        rel = path.relative_to(base)
        lang, doc_id = _lang_of(rel, str(path))
        text = "\n".join(line for _, line in _lines(str(path)))
        yield Doc(doc_id, lang, title=rel.stem, text=text, metadata={"path": str(rel)}, path=str(path))


def _lang_of(rel: Path, path: str) -> tuple[str, str]:
    parts = rel.parts
    if len(parts) > 1:
        return check_language(parts[0], path=path), str(Path(*parts[1:]))
    stem_parts = rel.name.split(".")
    if len(stem_parts) >= 3:
        lang = stem_parts[-2]
        return check_language(lang, path=path), ".".join(stem_parts[:-2] + stem_parts[-1:])
    raise ImportFailure(
        "cannot tell the language: put the file in a language folder (en/...) or name it NAME.LANG.txt", path=path
    )


def total_bytes(paths: list[str]) -> int:
    """Size of the input in bytes (folders summed)."""
    total = 0
    for p in paths:
        if os.path.isdir(p):
            total += sum(f.stat().st_size for f in Path(p).rglob("*") if f.is_file())
        elif os.path.exists(p):
            total += os.path.getsize(p)
    return total
