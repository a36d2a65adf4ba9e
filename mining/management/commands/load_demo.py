"""Import the demo corpus: Django's own translation catalogues, human translations that ship inside the installed
Django package (no download). Idempotent.

`--keep-share` thins it: each language keeps that share of its translations (a different part per language, fixed by
a hash of the entry), so that English strings lose their partner as in a corpus crawled from the web. Measured
(bench/demo_choice.py, docs/BENCHMARKS.md "The demo"), thinning does not help the demo: the margin already leaves the
strings without a partner out, so the pairs the filters leave are gold pairs either way, and fewer of them make the
label-free threshold's fit worse. The demo keeps every translation; its run uses the distance margin instead
(start_demo_run).

`--decoys` also imports the other apps' catalogues of django.contrib (auth, humanize, gis, ...) as a second corpus,
DECOY_CORPUS: messages of the same kind that translate nothing of the demo corpus, which the demo run's precision
estimate picks as its decoys (mining/selectors/precision.py, decoy_corpus_for), as a user's second collection in the
same language would be picked."""

import hashlib
import tempfile
from pathlib import Path

import django
from django.core.management.base import BaseCommand, CommandError

from mining.models import Corpus, JobStatus
from mining.services.imports import import_execute, import_job_create

DEMO_CORPUS = "demo-django-ui"
DECOY_CORPUS = "demo-django-contrib"
CATALOGUES = {"django/conf": "conf/locale", "django/contrib/admin": "contrib/admin/locale"}
OTHER_APPS = ("admindocs", "auth", "contenttypes", "flatpages", "gis", "humanize", "postgres", "redirects", "sessions")
DECOY_CATALOGUES = {f"django/contrib/{app}": f"contrib/{app}/locale" for app in (*OTHER_APPS, "sites")}
PACKAGES = ("rest_framework", "axes")  # installed apps whose wheels carry Django catalogues


def demo_files(langs: list[str], catalogues: dict[str, str] = CATALOGUES) -> tuple[list[str], dict[str, str]]:
    """The .po files of the demo catalogues (or of `catalogues`) for `langs`, and the catalogue name of each."""
    root = Path(django.__file__).parent
    paths, names = [], {}
    for name, locale in catalogues.items():
        for lang in langs:
            for domain in ("django.po", "djangojs.po"):
                path = root / locale / lang / "LC_MESSAGES" / domain
                if path.exists():
                    key = str(path)
                    paths.append(key)
                    names[key] = f"{name}/{domain.removesuffix('.po')}"
    return paths, names


def package_catalogues(langs: list[str], folder: Path) -> tuple[list[str], dict[str, str]]:
    """The Django catalogues that other installed packages ship (PACKAGES) for `langs`, as .po files: a compiled
    catalogue (.mo) is written out as a .po copy in `folder`."""
    import importlib.util

    import polib

    paths, names = [], {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        root = Path(next(iter(spec.submodule_search_locations)))
        for lang in langs:
            base = root / "locale" / lang / "LC_MESSAGES" / "django"
            if base.with_suffix(".po").exists():
                path = str(base.with_suffix(".po"))
            elif base.with_suffix(".mo").exists():
                path = str(folder / f"{package}-{lang}.po")
                catalogue = polib.mofile(str(base.with_suffix(".mo")))
                catalogue.metadata.setdefault("Language", lang)  # the directory says it where the header does not
                catalogue.save_as_pofile(path)
            else:
                continue
            paths.append(path)
            names[path] = f"{package}/django"
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
        parser.add_argument(
            "--decoys",
            action="store_true",
            help=f"also import django.contrib's other catalogues as '{DECOY_CORPUS}' (the precision estimate's decoys)",
        )

    def handle(self, *args, langs: str, keep_share: float, name: str, decoys: bool, **options):
        if not 0 < keep_share <= 1:
            raise CommandError(f"--keep-share must be in (0, 1], not {keep_share}")
        if decoys:
            self._import_decoys(langs)
        if Corpus.objects.filter(name=name).exists():
            self.stdout.write(f"The demo corpus '{name}' is already there.")
            return
        paths, names = demo_files(langs.split(","))
        if not paths:
            raise CommandError("no Django catalogues found for " + langs)
        kept_words = "every translation" if keep_share >= 1 else f"{keep_share:.0%} of each language's translations"
        with tempfile.TemporaryDirectory(prefix="pcapp-demo-") as folder:
            copies, copy_names = thinned_copies(paths, names, keep_share, Path(folder))
            job = _import_catalogues(
                name,
                copies,
                copy_names,
                source=f"Django {django.__version__} locale/, {kept_words}",
                description="Django's interface strings (English) with their human translations; each language "
                f"keeps {kept_words} (a different part per language), so that not every string has a partner.",
            )
        s = job.stats
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo corpus '{name}': {s['sentences']} sentences, {s['gold_sentence_pairs']} gold pairs "
                f"in {langs}, from Django {django.__version__}'s catalogues ({kept_words})."
            )
        )

    def _import_decoys(self, langs: str) -> None:
        if Corpus.objects.filter(name=DECOY_CORPUS).exists():
            self.stdout.write(f"The decoy corpus '{DECOY_CORPUS}' is already there.")
            return
        paths, names = demo_files(langs.split(","), DECOY_CATALOGUES)
        if not paths:
            raise CommandError("no django.contrib catalogues found for " + langs)
        with tempfile.TemporaryDirectory(prefix="pcapp-decoys-") as folder:
            more, more_names = package_catalogues(langs.split(","), Path(folder))
            job = _import_catalogues(
                DECOY_CORPUS,
                paths + more,
                {**names, **more_names},
                source=f"Django {django.__version__} contrib/*/locale/ (not admin), {', '.join(PACKAGES)}",
                description="The interface strings of django.contrib's other apps with their translations: text of "
                "the demo's kind that translates nothing of it, which the demo run's precision estimate uses as "
                "decoys.",
            )
        self.stdout.write(
            self.style.SUCCESS(f"Decoy corpus '{DECOY_CORPUS}': {job.stats['sentences']} sentences in {langs}.")
        )


def _import_catalogues(name: str, paths: list[str], names: dict[str, str], *, source: str, description: str):
    """Import the .po catalogues `paths` (English source) as corpus `name`, inline; the finished job, or a
    CommandError with the import's error."""
    job = import_job_create(
        corpus_name=name,
        fmt="po",
        paths=paths,
        options={"src_lang": "en", "catalogue_names": names, "source": source, "description": description},
    )
    job = import_execute(job=job)
    if job.status != JobStatus.SUCCEEDED:
        raise CommandError(job.error)
    return job
