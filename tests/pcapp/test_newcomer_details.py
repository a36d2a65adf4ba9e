"""Small things a newcomer meets: `manage.py help` describes pcapp's commands, every `export` argument has help, stored
values read as words, the reliability chart spreads bins that all lie high."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from feedback.charts import axis_start, reliability_svg
from mining.words import shown

ROOT = Path(__file__).resolve().parents[2]


def test_manage_help_lists_pcapps_commands_with_what_they_do():
    out = subprocess.run(
        [sys.executable, "manage.py", "help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    own = out[: out.index("Type 'manage.py help <subcommand>'")]
    assert "pcapp's commands" in own
    for line in ("  mine ", "  export ", "  load_demo ", "  evaluate_mining "):
        assert line in own
    assert "Mine sentence pairs between two languages" in own
    assert "[mining]" in out  # Django's own listing follows


def test_every_export_argument_has_help():
    from django.core.management import load_command_class

    parser = load_command_class("mining", "export").create_parser("manage.py", "export")
    mine = [a for a in parser._actions if a.dest not in ("help", "version", "verbosity", "settings", "pythonpath")]
    mine = [a for a in mine if not a.dest.startswith(("traceback", "no_color", "force_color", "skip_checks"))]
    assert [a.dest for a in mine if not a.help] == []


def test_stored_values_read_as_words():
    assert [shown(v) for v in (True, False, None, "", 1.1733485460281372, 2.0, 4, "exact")] == [
        "yes", "no", "–", "–", "1.1733", "2", "4", "exact",
    ]  # fmt: skip


def test_the_reliability_chart_zooms_where_every_bin_lies_high():
    assert axis_start([0.1, 0.9]) == 0.0
    assert axis_start([0.83, 0.9, 0.97]) == 0.7
    svg = str(reliability_svg({"head": ([0.82, 0.9, 0.97], [0.8, 0.92, 0.99], [10, 10, 10])}))
    assert "(axes from 0.7)" in svg and svg.count('class="reliability-bin"') == 3
