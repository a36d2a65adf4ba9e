#!/usr/bin/env python
"""Django's command-line utility for pcapp. `manage.py help` (or no command) lists pcapp's own commands first, each
with its description, then Django's."""

import os
import sys

OWN_APPS = ("mining", "annotation", "feedback", "pcapp")


def own_commands_help() -> str:
    """pcapp's commands with the first sentence of each one's help, as `manage.py help` prints them."""
    import django
    from django.core.management import get_commands, load_command_class

    django.setup()
    lines = ["pcapp's commands (`manage.py COMMAND --help` for a command's options):", ""]
    own = sorted((name, app) for name, app in get_commands().items() if app in OWN_APPS)
    width = max((len(name) for name, _ in own), default=0)
    for name, app in own:
        text = " ".join(str(load_command_class(app, name).help or "").split())
        first = text.split(". ")[0].rstrip(".")
        lines.append(f"  {name.ljust(width)}  {first}")
    return "\n".join(lines) + "\n"


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")
    from django.core.management import execute_from_command_line

    if sys.argv[1:] in ([], ["help"], ["--help"], ["-h"]):
        sys.stdout.write(own_commands_help() + "\n")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
