"""Import the demo corpus: Django's own translation catalogues, human translations that ship inside the installed
Django package (no download). Idempotent.

`--keep-share` thins it: each language keeps that share of its translations (a different part per language, fixed by
a hash of the entry), so that English strings lose their partner as in a corpus crawled from the web. Measured
(bench/demo_choice.py, docs/BENCHMARKS.md "The demo"), thinning does not help the demo: the margin already leaves the
strings without a partner out, so the pairs the filters leave are gold pairs either way, and fewer of them make the
label-free threshold's fit worse. The demo keeps every translation; its run uses the distance margin instead
(start_demo_run)."""

import hashlib
import tempfile
from pathlib import Path

import django
from django.core.management.base import BaseCommand, CommandError

from mining.models import Corpus, JobStatus
from mining.services.imports import import_execute, import_job_create

DEMO_CORPUS = "demo-django-ui"
CATALOGUES = {"django/conf": "conf/locale", "django/contrib/admin": "contrib/admin/locale"}


def demo_files(langs: list[str]) -> tuple[list[str], dict[str, str]]:
    """The .po files of the demo catalogues for `langs`, and the catalogue name of each."""
    root = Path(django.__file__).parent
    paths, names = [], {}
    for name, locale in CATALOGUES.items():
        for lang in langs:
            for domain in ("django.po", "djangojs.po"):
                path = root / locale / lang / "LC_MESSAGES" / domain
                if path.exists():
                    key = str(path)
                    paths.append(key)
                    names[key] = f"{name}/{domain.removesuffix('.po')}"
    return paths, names


def kept(lang: str, entry_key: str, share: float) -> bool:
    """Whether language `lang` keeps the translation of the entry `entry_key` (msgctxt + msgid) at `share`: a fixed
    pseudo-random draw per (language, entry), so each language keeps a different part and every load is the same."""
    if share >= 1:
        return True
    draw = int.from_bytes(hashlib.sha1(f"{lang}\x04{entry_key}".encode()).digest()[:8], "big") / 2**64
    return draw < share


def thinned_copies(paths: list[str], names: dict[str, str], share: float, folder: Path) -> tuple[list, dict]:
    """Copies of the catalogues in `folder` in which each language keeps `share` of its translations (the others
    become untranslated entries, which the import skips); the paths and catalogue names of the copies."""
    import polib

    out, out_names = [], {}
    for i, path in enumerate(paths):
        lang = Path(path).parents[1].name
        catalogue = polib.pofile(path, encoding="utf-8")
        for entry in catalogue:
            if not kept(lang, f"{entry.msgctxt or ''}\x04{entry.msgid}", share):
                entry.msgstr = ""
                entry.msgstr_plural = {k: "" for k in entry.msgstr_plural}
        copy = folder / f"{i:02d}-{lang}-{Path(path).name}"
        catalogue.save(str(copy))
        out.append(str(copy))
        out_names[str(copy)] = names[path]
    return out, out_names


class Command(BaseCommand):
    help = (
        "Import Django's own en-fr/de/es/it interface catalogues as the demo corpus (skipped if present); "
        "--keep-share thins each language's translations."
    )

    def add_arguments(self, parser):
        parser.add_argument("--langs", default="fr,de,es,it", help="the languages besides English (comma-separated)")
        parser.add_argument(
            "--keep-share",
            type=float,
            default=1.0,
            help="share of each language's translations kept (default 1: every one)",
        )
        parser.add_argument("--name", default=DEMO_CORPUS, help=f"the corpus's name (default {DEMO_CORPUS})")

    def handle(self, *args, langs: str, keep_share: float, name: str, **options):
        if not 0 < keep_share <= 1:
            raise CommandError(f"--keep-share must be in (0, 1], not {keep_share}")
        if Corpus.objects.filter(name=name).exists():
            self.stdout.write(f"The demo corpus '{name}' is already there.")
            return
        paths, names = demo_files(langs.split(","))
        if not paths:
            raise CommandError("no Django catalogues found for " + langs)
        kept_words = "every translation" if keep_share >= 1 else f"{keep_share:.0%} of each language's translations"
        with tempfile.TemporaryDirectory(prefix="pcapp-demo-") as folder:
            copies, copy_names = thinned_copies(paths, names, keep_share, Path(folder))
            job = import_job_create(
                corpus_name=name,
                fmt="po",
                paths=copies,
                options={
                    "src_lang": "en",
                    "catalogue_names": copy_names,
                    "source": f"Django {django.__version__} locale/, {kept_words}",
                    "description": "Django's interface strings (English) with their human translations; each "
                    f"language keeps {kept_words} (a different part per language), so that not every string has "
                    "a partner.",
                },
            )
            job = import_execute(job=job)
        if job.status != JobStatus.SUCCEEDED:
            raise CommandError(job.error)
        s = job.stats
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo corpus '{name}': {s['sentences']} sentences, {s['gold_sentence_pairs']} gold pairs "
                f"in {langs}, from Django {django.__version__}'s catalogues ({kept_words})."
            )
        )
