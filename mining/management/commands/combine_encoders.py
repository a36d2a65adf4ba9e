"""Combine encoders: `manage.py combine_encoders adapted:3=0.8 dan=0.2` registers a 'combined' encoder whose cosine is
the weighted mean of its members' (runs and `mine --encoder combined` use it like any other)."""

from django.core.management.base import BaseCommand, CommandError

from mining.management.commands.mine import _encoder
from mining.services.encoders import combine_encoders


class Command(BaseCommand):
    help = "Register a weighted combination of encoder artefacts as a new 'combined' encoder."

    def add_arguments(self, parser):
        parser.add_argument(
            "members",
            nargs="+",
            metavar="NAME[:VERSION]=WEIGHT",
            help="an encoder artefact (the latest version when none is given) and its weight",
        )

    def handle(self, *args, **o):
        members = []
        for spec in o["members"]:
            name, sep, weight = spec.rpartition("=")
            try:
                value = float(weight) if sep else 1.0
            except ValueError:
                raise CommandError(f"'{spec}': the weight must be a number (NAME[:VERSION]=WEIGHT)") from None
            members.append((_encoder(name if sep else spec), value))
        try:
            artefact = combine_encoders(members)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        parts = ", ".join(f"{m['artefact']} x {m['weight']:g}" for m in artefact.params["members"])
        self.stdout.write(self.style.SUCCESS(f"Registered encoder combined:{artefact.version} = {parts}"))
