"""Build a realistic multilingual web crawl (WARC.gz files) from the HTML manuals Debian ships in several languages.

    python scripts/build_crawl.py OUT_DIR [--langs en,fr,de,es,it] [--copies 1] [--files 2] [--seed 0] [--install]

The manuals (installed with apt when missing and `--install` is given): the GIMP manual (gimp-help-*), the Debian
installation guide (installation-guide-amd64), aptitude's manual (aptitude-doc-*), the Debian Reference
(debian-reference-*), the Developer's Reference (developers-reference-*), the Debian FAQ (debian-faq-*) and the New
Maintainers' Guide (maint-guide-*). Each manual's pages keep their own navigation (DocBook / Sphinx headers and
footers) and are wrapped in a site template of the page's language (menu, cookie banner, footer), then published
as synthetic sites with different URL schemes:

| site | pages | URL scheme |
|---|---|---|
| gimp-docs.org | GIMP manual, first third | path segment `/en/…`, `/fr/…` |
| {lang}.gimp-tutorials.net | GIMP manual, second third | subdomain with region (`en-us.`, `fr-fr.`) |
| imaging-help.com | GIMP manual, last third | query `view.php?page=…&lang=fr` |
| aptitude-manual.org | aptitude manual | file suffix `ch01.fr.html` |
| debian-install.info | installation guide | no marker (a random name per page and language) |
| debref.example.net | Debian Reference | misleading: `/en/`, `/fr/` markers, each language's chapters shuffled |
| devref.org | Developer's Reference | language names `/english/`, `/french/`, `/deutsch/`, `/italiano/` |
| faq.debian-help.org | Debian FAQ | `/eng/`, `/fra/`; served in Windows-1252 while the header says UTF-8 |
| maint-guide.net | New Maintainers' Guide | `guide/start_fr.html` |

Also: 10 % of the non-English pages left out (pages without a translation), 2 % of pages with a near-duplicate
(a print version: the same text with one line more), 1 % crawled twice (same URL), and per site a robots.txt, a
redirect, a 404, a few images and request records. `--copies N` repeats every site under N host prefixes, each
copy's text marked with its number (so nothing is a duplicate), to build large files. Gold: OUT_DIR/gold.jsonl,
one line per page `{"url", "lang", "site", "page"}`; pages sharing `page` translate each other.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import random
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGES = [
    *(f"gimp-help-{lang}" for lang in ("en", "fr", "de", "es", "it")),
    "installation-guide-amd64",
    *(f"aptitude-doc-{lang}" for lang in ("en", "es", "fr", "it")),
    *(f"debian-reference-{lang}" for lang in ("en", "fr", "de", "es", "it")),
    "developers-reference",
    *(f"developers-reference-{lang}" for lang in ("de", "fr", "it")),
    "debian-faq",
    *(f"debian-faq-{lang}" for lang in ("de", "fr", "it")),
    "maint-guide",
    *(f"maint-guide-{lang}" for lang in ("de", "es", "fr", "it")),
]

MENU = {
    "en": (
        "Home",
        "Documentation",
        "Downloads",
        "Community",
        "Contact",
        "This site uses cookies. Accept?",
        "All rights reserved. Privacy policy. Terms of use.",
    ),
    "fr": (
        "Accueil",
        "Documentation",
        "Téléchargements",
        "Communauté",
        "Contact",
        "Ce site utilise des cookies. Accepter ?",
        "Tous droits réservés. Politique de confidentialité.",
    ),
    "de": (
        "Startseite",
        "Dokumentation",
        "Downloads",
        "Gemeinschaft",
        "Kontakt",
        "Diese Website verwendet Cookies. Akzeptieren?",
        "Alle Rechte vorbehalten. Datenschutz. Impressum.",
    ),
    "es": (
        "Inicio",
        "Documentación",
        "Descargas",
        "Comunidad",
        "Contacto",
        "Este sitio utiliza cookies. ¿Aceptar?",
        "Todos los derechos reservados. Política de privacidad.",
    ),
    "it": (
        "Home",
        "Documentazione",
        "Download",
        "Comunità",
        "Contatti",
        "Questo sito utilizza i cookie. Accettare?",
        "Tutti i diritti riservati. Informativa sulla privacy.",
    ),
}
NAMES = {"en": "english", "fr": "french", "de": "deutsch", "es": "espanol", "it": "italiano"}
ISO3 = {"en": "eng", "fr": "fra", "de": "deu", "es": "spa", "it": "ita"}
REGION = {"en": "en-us", "fr": "fr-fr", "de": "de-de", "es": "es-es", "it": "it-it"}


@dataclass(frozen=True)
class Page:
    collection: str
    name: str  # shared by a page's translations
    lang: str
    path: Path


def _collection(name: str, langs: list[str], pattern) -> list[Page]:
    out = []
    for lang in langs:
        for path in sorted(pattern(lang)):
            stem = path.name.split(".")[0]
            out.append(Page(name, stem, lang, path))
    return out


def manuals(langs: list[str]) -> dict[str, list[Page]]:
    """Every manual's pages by collection (pages of a language the package does not ship are simply absent)."""
    g = Path("/usr/share/gimp/2.0/help")
    ig = Path("/usr/share/doc/installation-guide-amd64")
    ap = Path("/usr/share/doc/aptitude/html")
    dr = Path("/usr/share/debian-reference")
    dv = Path("/usr/share/developers-reference")
    fq = Path("/usr/share/doc/debian/FAQ")

    def maint(lang: str) -> list[Path]:
        folder = Path("/usr/share/doc/maint-guide/html" if lang == "en" else f"/usr/share/doc/maint-guide-{lang}/html")
        return list(folder.glob(f"*.{lang}.html"))

    return {
        "gimp": _collection("gimp", langs, lambda lang: (g / lang).glob("*.html")),
        "instguide": _collection("instguide", langs, lambda lang: (ig / lang).glob("*.html")),
        "aptitude": _collection("aptitude", langs, lambda lang: (ap / lang).glob("*.html")),
        "debref": _collection("debref", langs, lambda lang: dr.glob(f"*.{lang}.html")),
        "devref": _collection(
            "devref",
            langs,
            lambda lang: [
                p
                for p in (dv if lang == "en" else dv / lang).glob("*.html")
                if p.name not in ("search.html", "genindex.html")
            ],
        ),
        "faq": _collection("faq", langs, lambda lang: (fq if lang == "en" else fq / lang).glob(f"*.{lang}.html")),
        "maint": _collection("maint", langs, maint),
    }


def _slug(*parts: str) -> str:
    return hashlib.blake2b("/".join(parts).encode(), digest_size=6).hexdigest()


def url_for(site: str, page: Page, prefix: str, shuffle: dict[tuple[str, str], str]) -> tuple[str, str]:
    """(URL, site name) of a page under one site's scheme."""
    lang, stem = page.lang, page.name
    if site == "gimp-path":
        return f"https://{prefix}gimp-docs.org/{lang}/{stem}.html", "gimp-docs.org"
    if site == "gimp-sub":
        return f"https://{REGION[lang]}.{prefix}gimp-tutorials.net/tutorial/{stem}", "gimp-tutorials.net"
    if site == "gimp-query":
        return f"https://www.{prefix}imaging-help.com/view.php?page={stem}&lang={lang}", "imaging-help.com"
    if site == "aptitude":
        return f"https://{prefix}aptitude-manual.org/manual/{stem}.{lang}.html", "aptitude-manual.org"
    if site == "instguide":
        return f"https://{prefix}debian-install.info/doc/{_slug(prefix, stem, lang)}.html", "debian-install.info"
    if site == "debref":
        return f"https://{prefix}debref.example.net/{lang}/{shuffle[(lang, stem)]}.html", "debref.example.net"
    if site == "devref":
        return f"https://{prefix}devref.org/{NAMES[lang]}/{stem}.html", "devref.org"
    if site == "faq":
        return f"https://faq.{prefix}debian-help.org/{ISO3[lang]}/{stem}.html", "debian-help.org"
    return f"https://{prefix}maint-guide.net/guide/{stem}_{lang}.html", "maint-guide.net"


SITES = {  # site scheme -> (collection, which share of its pages)
    "gimp-path": ("gimp", 0),
    "gimp-sub": ("gimp", 1),
    "gimp-query": ("gimp", 2),
    "aptitude": ("aptitude", None),
    "instguide": ("instguide", None),
    "debref": ("debref", None),
    "devref": ("devref", None),
    "faq": ("faq", None),
    "maint": ("maint", None),
}


def _wrap(html: bytes, lang: str, site: str, mark: str) -> bytes:
    """The page inside its site's template (menu, cookie banner, footer, in the page's language)."""
    home, docs, dl, comm, contact, cookie, foot = MENU.get(lang, MENU["en"])
    nav = (
        f'<header class="site-header"><nav class="menu"><a href="/">{home}</a> <a href="/docs">{docs}</a> '
        f'<a href="/dl">{dl}</a> <a href="/community">{comm}</a> <a href="/contact">{contact}</a></nav></header>'
        f'<div class="cookie-banner" id="cookies">{cookie} <button>OK</button></div>'
    ).encode()
    footer = f'<footer class="site-footer"><p>© 2024 {site}. {foot}</p>{mark}</footer>'.encode()
    text = re.sub(rb"(<body[^>]*>)", lambda m: m.group(1) + nav, html, count=1, flags=re.I)
    return re.sub(rb"(</body>)", lambda m: footer + m.group(1), text, count=1, flags=re.I)


def _marked(html: bytes, copy: int) -> bytes:
    """A copy's text marked with its number in every paragraph, so no two copies' pages are duplicates."""
    if copy == 0:
        return html
    return re.sub(rb"(<p[^>]*>)", lambda m: m.group(1) + f"[m{copy}] ".encode(), html, flags=re.I)


def _http(status: str, headers: list[tuple[str, str]]):
    from warcio.statusandheaders import StatusAndHeaders

    return StatusAndHeaders(status, headers, protocol="HTTP/1.1")


def _write(writer, url: str, body: bytes, ctype: str, status: str = "200 OK", extra=()) -> None:
    writer.write_record(
        writer.create_warc_record(
            url,
            "request",
            payload=io.BytesIO(b""),
            http_headers=_http(f"GET /{url.split('/', 3)[-1]} HTTP/1.1", [("Host", url.split("/")[2])]),
        )
    )
    http = _http(status, [("Content-Type", ctype), *extra])
    writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))


def site_pages(pages: dict[str, list[Page]], rng: random.Random) -> Iterator[tuple[str, Page]]:
    """(site scheme, page) for every published page: the GIMP manual cut in three sites, 10 % of translations
    left out."""
    for site, (coll, third) in SITES.items():
        items = pages[coll]
        if third is not None:
            names = sorted({p.name for p in items})
            cut = set(names[third * len(names) // 3 : (third + 1) * len(names) // 3])
            items = [p for p in items if p.name in cut]
        for page in items:
            if page.lang != "en" and rng.random() < 0.10:
                continue
            yield site, page


def build(out: Path, langs: list[str], copies: int, files: int, seed: int, plain: bool = False) -> dict:
    from warcio.warcwriter import WARCWriter

    rng = random.Random(seed)
    pages = manuals(langs)
    published = list(site_pages(pages, rng))
    debref_names = sorted({p.name for p in pages["debref"]})
    out.mkdir(parents=True, exist_ok=True)
    ext = "warc" if plain else "warc.gz"
    handles = [(out / f"crawl-{n:02d}.{ext}").open("wb") for n in range(files)]
    writers = [WARCWriter(h, gzip=not plain) for h in handles]
    gold = (out / "gold.jsonl").open("w", encoding="utf-8")
    images = sorted(Path("/usr/share/gimp/2.0/help/en/images").rglob("*.png"))[:5]
    counts = {"pages": 0, "near_duplicates": 0, "recrawled": 0, "other_records": 0}
    for copy in range(copies):
        prefix = f"m{copy}-" if copy else ""
        shuffle = {}
        for lang in langs:  # the misleading site: each language's chapters under shuffled names
            names = debref_names[:]
            random.Random(f"{seed}-{lang}-{copy}").shuffle(names)
            shuffle.update({(lang, a): b for a, b in zip(debref_names, names, strict=True)})
        for i, (site, page) in enumerate(published):
            w = writers[(i + copy) % files]
            url, site_name = url_for(site, page, prefix, shuffle)
            body = _wrap(_marked(page.path.read_bytes(), copy), page.lang, site_name, "")
            ctype = "text/html; charset=utf-8"
            if site == "faq":  # served in Windows-1252 while the header says UTF-8
                body = body.decode("utf-8").encode("cp1252", errors="xmlcharrefreplace")
            _write(w, url, body, ctype)
            gold.write(
                json.dumps(
                    {"url": url, "lang": page.lang, "site": site_name, "page": f"{copy}/{page.collection}/{page.name}"}
                )
                + "\n"
            )
            counts["pages"] += 1
            if rng.random() < 0.02:  # a print version: the same text and one line more
                extra = b"<p>Printed version of this page.</p>"
                _write(
                    w,
                    url + ("&" if "?" in url else "?") + "print=1",
                    body.replace(b"</footer>", extra + b"</footer>"),
                    ctype,
                )
                counts["near_duplicates"] += 1
            if rng.random() < 0.01:  # crawled twice
                _write(w, url, body, ctype)
                counts["recrawled"] += 1
        counts["other_records"] += _other_records(writers, prefix, images)
    for h in handles:
        h.close()
    gold.close()
    return {
        **counts,
        "files": files,
        "bytes": sum((out / f"crawl-{n:02d}.{ext}").stat().st_size for n in range(files)),
    }


def _other_records(writers, prefix: str, images: list[Path]) -> int:
    """Per site: robots.txt, a redirect, a 404 and a few images (what a crawler also fetches)."""
    n = 0
    for i, site in enumerate(SITES):
        w = writers[i % len(writers)]
        root = url_for(site, Page("", "index", "en", Path()), prefix, {("en", "index"): "index"})[0]
        base = "/".join(root.split("/")[:3])
        _write(w, base + "/robots.txt", b"User-agent: *\nAllow: /\n", "text/plain")
        _write(w, base + "/", b"", "text/html", "301 Moved Permanently", [("Location", root)])
        _write(w, base + "/missing.html", b"<html><body>Not found</body></html>", "text/html", "404 Not Found")
        for img in images:
            _write(w, f"{base}/images/{img.name}", img.read_bytes(), "image/png")
        n += 3 + len(images)
    return n


def install() -> None:
    missing = [p for p in PACKAGES if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--langs", default="en,fr,de,es,it")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--files", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plain", action="store_true", help="uncompressed .warc files (for size-controlled benches)")
    parser.add_argument("--install", action="store_true", help="apt-get install the manuals that are missing")
    args = parser.parse_args()
    if args.install:
        install()
    print(json.dumps(build(args.out, args.langs.split(","), args.copies, args.files, args.seed, args.plain)))


if __name__ == "__main__":
    main()
