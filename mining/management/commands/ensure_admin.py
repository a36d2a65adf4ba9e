"""Create the first admin account if there is none, and say how to log in."""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create an 'admin' superuser with a random password (kept in PCAPP_DATA_DIR/admin-password.txt)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, username: str, **options):
        user_model = get_user_model()
        secret_file = settings.PCAPP_DATA_DIR / "admin-password.txt"
        if user_model.objects.filter(is_superuser=True).exists():
            where = f" (first password in {secret_file})" if secret_file.exists() else ""
            self.stdout.write(f"Admin account exists{where}.")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        settings.PCAPP_DATA_DIR.mkdir(parents=True, exist_ok=True)
        secret_file.write_text(password + "\n")
        secret_file.chmod(0o600)
        self.stdout.write(
            self.style.SUCCESS(
                f"Created admin account: log in as '{username}' with password '{password}' (also in {secret_file})."
            )
        )
