"""`manage.py cleanup_uploads [--older-than HOURS] [--dry-run]`: remove leftover upload folders."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from mining.services.uploads import uploads_cleanup


class Command(BaseCommand):
    help = (
        "Remove upload folders (PCAPP_DATA_DIR/uploads/) older than PCAPP_UPLOAD_RETENTION_HOURS that no pending or "
        "running import needs. An import removes its own upload when it ends; this catches what a crash or a "
        "refused request left. `./run app` runs it at start."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--older-than",
            type=float,
            default=None,
            metavar="HOURS",
            help=f"age in hours (default PCAPP_UPLOAD_RETENTION_HOURS, now {settings.PCAPP_UPLOAD_RETENTION_HOURS:g})",
        )
        parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")

    def handle(self, *args, older_than: float | None, dry_run: bool, **options):
        if older_than is not None and older_than < 0:
            raise CommandError("--older-than must be 0 or more hours")
        removed = uploads_cleanup(older_than_hours=older_than, dry_run=dry_run)
        verb = "Would remove" if dry_run else "Removed"
        for folder in removed:
            self.stdout.write(f"  {folder}")
        self.stdout.write(f"{verb} {len(removed)} upload folder{'' if len(removed) == 1 else 's'}.")
