"""Mark failed the runs and imports whose worker died: `manage.py reap_jobs` (each worker also does it at start)."""

from django.core.management.base import BaseCommand

from mining.models import ImportJob, MiningRun
from mining.services.jobs import jobs_reap_stalled


class Command(BaseCommand):
    help = "Mark failed every running run or import whose worker stopped renewing its lease (it can then be retried)."

    def handle(self, *args, **options):
        runs = jobs_reap_stalled(model=MiningRun)
        imports = jobs_reap_stalled(model=ImportJob)
        self.stdout.write(f"Stalled runs marked failed: {runs or 'none'}; stalled imports: {imports or 'none'}.")
