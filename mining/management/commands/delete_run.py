"""`manage.py delete_run RUN_ID [RUN_ID ...]`: delete finished (or stalled) runs with their candidates and files."""

from django.core.management.base import BaseCommand, CommandError

from mining.models import MiningRun
from mining.services.runs import run_delete


class Command(BaseCommand):
    help = "Delete runs with their candidates and shard files (a running run must be cancelled first)."

    def add_arguments(self, parser):
        parser.add_argument("run_ids", nargs="+", type=int, metavar="RUN_ID")

    def handle(self, *args, run_ids: list[int], **options):
        for pk in run_ids:
            run = MiningRun.objects.filter(pk=pk).first()
            if run is None:
                raise CommandError(f"no run {pk}")
            try:
                counts = run_delete(run=run)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"Run {pk} deleted ({counts.get('candidates', 0)} candidates).")
