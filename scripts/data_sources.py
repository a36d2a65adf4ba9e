"""Readers for the human translations that the package registries ship, and loaders for what fetch_data.py built.

Origins (kept apart so benchmarks can train on one and test on another):
  debian-mo        gettext catalogues (.mo) of installed Debian packages, /usr/share/locale/<lang>/LC_MESSAGES
  django           Django's own catalogues (.po) inside the installed PyPI package
  gimp-help        the GIMP user manual, Debian packages gimp-help-<lang> (HTML)
  debian-reference the Debian Reference manual, Debian packages debian-reference-<lang> (HTML)
  manpages         manual pages translated by manpages-l10n (Debian packages manpages-<lang>) and their English
                   originals installed on the machine (manpages and the packages the commands come from), rendered
                   with man(1)
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import unicodedata
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

SPACE = re.compile(r"\s+")
ACCEL = re.compile(r"(?<!\w)_(?=\w)|&(?=\w)")

DOC_COLLECTIONS = {
    "gimp-help": {"root": "/usr/share/gimp/2.0/help/{lang}", "pattern": "*.html", "packages": "gimp-help-{lang}"},
    "debian-reference": {
        "root": "/usr/share/debian-reference",
        "pattern": "*.{lang}.html",
        "packages": "debian-reference-{lang}",
    },
    "manpages": {
        "root": "/usr/share/man",
        "pattern": "man[1-8]/*.gz",
        "packages": "manpages-{lang}",
        "en_packages": "manpages",
        "renderer": "man",
    },
}


# Pages whose entries are sorted alphabetically in each language (the manual's index and glossary): their blocks do
# not line up across languages, so they give no gold pairs; their entries also repeat every page title.
UNALIGNED_PAGES = {"gimp-help-index.html", "glossary.html", "index.html"}


def clean(text: str) -> str:
    """One line of text: whitespace collapsed (tabs and newlines would break TSV)."""
    return SPACE.sub(" ", text).strip()


def n_words(text: str) -> int:
    return len(re.findall(r"\w+", text))


def catalogue_pairs(path: str) -> Iterator[tuple[str, str]]:
    """Translated, non-fuzzy (msgid, msgstr) pairs of a .po or .mo file; identical sides are dropped."""
    import polib

    try:
        cat = polib.mofile(path) if path.endswith(".mo") else polib.pofile(path)
    except (OSError, ValueError, UnicodeDecodeError):
        return
    for e in cat:
        if not e.msgid or not e.msgstr or "fuzzy" in e.flags or e.obsolete:
            continue
        src, tgt = clean(e.msgid), clean(e.msgstr)
        if src and tgt and src != tgt:
            yield src, tgt


class _Blocks(HTMLParser):
    """Text of block-level elements (paragraphs, list items, headings, cells), skipping code and scripts."""

    BLOCK = {"p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "title", "dt", "dd", "td", "th", "caption"}
    SKIP = {"pre", "code", "script", "style", "kbd", "tt"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._buf: list[str] = []
        self._skip = 0
        self.title = ""

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self._skip += 1
        elif tag in self.BLOCK:
            self._flush()

    def handle_endtag(self, tag):
        if tag in self.SKIP and self._skip:
            self._skip -= 1
        elif tag in self.BLOCK:
            text = self._flush()
            if tag == "title" and text and not self.title:
                self.title = text

    def handle_data(self, data):
        if not self._skip:
            self._buf.append(data)

    def _flush(self) -> str:
        text = clean("".join(self._buf))
        self._buf = []
        if text:
            self.blocks.append(text)
        return text


def html_blocks(path: Path) -> tuple[str, list[str]]:
    """(title, blocks) of an HTML file."""
    parser = _Blocks()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    parser._flush()
    return parser.title, parser.blocks


def man_blocks(path: Path) -> tuple[str, list[str]]:
    """(title, blocks) of a manual page rendered by man(1) without hyphenation or justification.

    A block is a run of non-blank lines at the same indentation (a heading, a paragraph, an option's name, its
    description); the page's header and footer lines are dropped. An empty list when man cannot render it."""
    env = {**os.environ, "MANWIDTH": "1000", "MAN_KEEP_FORMATTING": "0", "LC_ALL": "C.UTF-8"}
    try:
        out = subprocess.run(
            ["man", "--nh", "--nj", "-E", "UTF-8", "-l", str(path)],
            capture_output=True,
            env=env,
            timeout=60,
            check=False,
        ).stdout.decode("utf-8", errors="replace")
        text = subprocess.run(
            ["col", "-b"], input=out.encode("utf-8"), capture_output=True, timeout=60, check=False
        ).stdout.decode("utf-8", errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return "", []
    lines = text.splitlines()[1:-1]  # header "LS(1) ... LS(1)" and footer
    blocks: list[str] = []
    buf: list[str] = []
    indent = None
    for line in lines + [""]:
        stripped = line.strip()
        ind = len(line) - len(line.lstrip()) if stripped else None
        if buf and (not stripped or ind != indent):
            blocks.append(clean(" ".join(buf)))
            buf = []
        if stripped:
            buf.append(stripped)
            indent = ind
    title = next((b for i, b in enumerate(blocks[1:2]) if i == 0), "")  # the NAME line: "ls - list directory"
    return title, [b for b in blocks if b]


def collection_files(collection: str, lang: str) -> dict[str, Path]:
    """Document id (shared across languages) -> source path (HTML page or manual page)."""
    spec = DOC_COLLECTIONS[collection]
    if spec.get("renderer") == "man":
        root = Path(spec["root"]) if lang == "en" else Path(spec["root"]) / lang
        # Aliases (symbolic links) would duplicate documents: only real files count.
        return {str(p.relative_to(root)): p for p in sorted(root.glob(spec["pattern"])) if not p.is_symlink()}
    root = Path(spec["root"].format(lang=lang))
    if not root.is_dir():
        return {}
    files = sorted(root.glob(spec["pattern"].format(lang=lang)))
    return {p.name.replace(f".{lang}.html", ".html"): p for p in files}


# -- loaders of what fetch_data.py wrote -------------------------------------------------------------------------


def load_pairs(
    data_dir: str | Path, src: str, tgt: str, origins: list[str] | None = None, min_words: int = 0
) -> list[tuple[str, str, str, str]]:
    """(src, tgt, origin, document id) pairs from datasets/sentences/<src>-<tgt>/<origin>.tsv (document id '' for
    catalogue pairs)."""
    folder = Path(data_dir) / "sentences" / f"{src}-{tgt}"
    out: list[tuple[str, str, str, str]] = []
    for path in sorted(folder.glob("*.tsv")):
        origin = path.stem
        if origins and origin not in origins:
            continue
        with path.open(encoding="utf-8", newline="") as fh:
            for row in csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) in (2, 3) and n_words(row[0]) >= min_words and n_words(row[1]) >= min_words:
                    out.append((row[0], row[1], origin, row[2] if len(row) == 3 else ""))
    return out


def load_documents(data_dir: str | Path, collection: str, lang: str) -> list[dict]:
    """The JSONL documents of one collection and language ({"id", "lang", "title", "url", "sentences"})."""
    path = Path(data_dir) / "documents" / collection / f"{lang}.jsonl"
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def normalised(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
