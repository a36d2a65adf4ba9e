"""Import the demo corpus: Django's own translation catalogues, human translations that ship inside the installed
Django package (no download). Idempotent."""

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


class Command(BaseCommand):
    help = "Import Django's own en-fr/de/es/it interface catalogues as the demo corpus (skipped if present)."

    def add_arguments(self, parser):
        parser.add_argument("--langs", default="fr,de,es,it")

    def handle(self, *args, langs: str, **options):
        if Corpus.objects.filter(name=DEMO_CORPUS).exists():
            self.stdout.write(f"The demo corpus '{DEMO_CORPUS}' is already there.")
            return
        paths, names = demo_files(langs.split(","))
        if not paths:
            raise CommandError("no Django catalogues found for " + langs)
        job = import_job_create(
            corpus_name=DEMO_CORPUS,
            fmt="po",
            paths=paths,
            options={
                "src_lang": "en",
                "catalogue_names": names,
                "source": f"Django {django.__version__} locale/",
                "description": "Django's interface strings (English) with their human translations.",
            },
        )
        job = import_execute(job=job)
        if job.status != JobStatus.SUCCEEDED:
            raise CommandError(job.error)
        s = job.stats
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo corpus '{DEMO_CORPUS}': {s['sentences']} sentences, {s['gold_sentence_pairs']} gold pairs "
                f"in {langs}, from Django {django.__version__}'s catalogues."
            )
        )
