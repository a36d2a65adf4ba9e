"""Streaming readers, one per format. Aligned formats yield `Pair`s, document formats yield `Doc`s.

Every reader decodes strictly and raises `ImportFailure` naming the file and the line or element at fault. None of
them holds a whole file in memory.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ImportFailure, decode_line
from .languages import check_language


@dataclass(frozen=True)
class Pair:
    """One aligned sentence pair; `src_key` (optional) identifies a repeated source sentence (PO msgctxt+msgid)."""

    src: str
    tgt: str
    src_key: str | None = None


@dataclass
class Doc:
    """A document: either `sentences` (pre-split) or `text` (split on import)."""

    external_id: str
    lang: str
    title: str = ""
    url: str = ""
    text: str | None = None
    sentences: list[str] | None = None
    metadata: dict = field(default_factory=dict)


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, decoded line without its newline) of a UTF-8 file; a UTF-8 BOM on line 1 is dropped."""
    with open(path, "rb") as fh:
        for no, raw in enumerate(fh, start=1):
            if no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            yield no, decode_line(raw.rstrip(b"\r\n"), path, no)


def read_tsv(path: str, *, header: bool | None = None) -> Iterator[Pair]:
    """Two tab-separated columns per line; a first line of `src<TAB>tgt`-like column names is skipped when `header`
    is True (None: skipped only when it reads 'source/target' or two language codes)."""
    for no, line in _lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2:
            raise ImportFailure(f"expected 2 tab-separated columns, found {len(cols)}", path=path, line=no)
        if no == 1 and (header or (header is None and _looks_like_header(cols))):
            continue
        yield Pair(cols[0], cols[1])


def _looks_like_header(cols: list[str]) -> bool:
    names = {c.strip().lower() for c in cols}
    return names <= {"source", "target", "src", "tgt", "source_text", "target_text"} or all(
        len(c.strip()) in (2, 3) and c.strip().isalpha() and c.strip().islower() for c in cols
    )


def read_moses(src_path: str, tgt_path: str) -> Iterator[Pair]:
    """Two files with one sentence per line, line i of one translating line i of the other."""
    src_lines, tgt_lines = _lines(src_path), _lines(tgt_path)
    n = 0
    rest_src = rest_tgt = 0
    for _, s in src_lines:
        t = next(tgt_lines, None)
        if t is None:
            rest_src = 1
            break
        n += 1
        yield Pair(s, t[1])
    rest_src += sum(1 for _ in src_lines)
    rest_tgt = sum(1 for _ in tgt_lines)
    if rest_src or rest_tgt:
        raise ImportFailure(
            f"Moses files differ in length: '{src_path}' has {n + rest_src} lines, '{tgt_path}' has {n + rest_tgt}"
        )


def read_tmx(path: str, src_lang: str, tgt_lang: str) -> Iterator[Pair]:
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
            yield Pair(src, tgt)
            # Drop the finished unit from <body> too, so memory stays flat however many units the file holds.
            elem.clear()
            if parent is not None:
                parent.clear()
    except ET.ParseError as exc:
        line, col = exc.position
        raise ImportFailure(
            f"malformed TMX at column {col + 1} ({exc.msg if hasattr(exc, 'msg') else exc})",
            path=path,
            line=line,
            element=f"after <tu> #{n_tu}",
        ) from None


def _tuid(elem: ET.Element) -> str:
    return f" (tuid '{elem.get('tuid')}')" if elem.get("tuid") else ""


def _pick(segs: dict[str, str], lang: str) -> str | None:
    lang = lang.lower()
    if lang in segs:
        return segs[lang]
    base = lang.replace("_", "-").split("-")[0]
    matches = [v for k, v in segs.items() if k.replace("_", "-").split("-")[0] == base]
    return matches[0] if len(matches) == 1 else None


def read_po(path: str, stats: dict) -> Iterator[Pair]:
    """msgid/msgstr pairs of a gettext catalogue; the header, fuzzy, obsolete and untranslated entries are skipped
    (and counted). For plural entries msgid is paired with msgstr[0]."""
    import polib

    _check_utf8_file(path)
    try:
        catalogue = polib.pofile(path, encoding="utf-8")
    except (OSError, ValueError) as exc:
        raise ImportFailure(f"not a valid PO file ({exc})", path=path) from None
    for entry in catalogue:
        if entry.obsolete or "fuzzy" in entry.flags:
            stats["po_fuzzy_or_obsolete"] = stats.get("po_fuzzy_or_obsolete", 0) + 1
            continue
        tgt = entry.msgstr or (entry.msgstr_plural.get(0) if entry.msgstr_plural else "")
        if not entry.msgid or not tgt:
            stats["po_untranslated"] = stats.get("po_untranslated", 0) + 1
            continue
        key = f"{entry.msgctxt or ''}\x04{entry.msgid}"
        yield Pair(entry.msgid, tgt, src_key=key)


def _check_utf8_file(path: str) -> None:
    for _ in _lines(path):
        pass


def read_jsonl(path: str) -> Iterator[Doc]:
    """One JSON document per line: {"id", "lang", "title", "url", "text"} or with a pre-split "sentences" list."""
    for no, line in _lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ImportFailure(f"not valid JSON ({exc.msg} at column {exc.colno})", path=path, line=no) from None
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
        )


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
        yield Doc(doc_id, lang, title=rel.stem, text=text, metadata={"path": str(rel)})


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
