"""The layering (pyproject.toml's import-linter contracts): the core imports no Django, Celery or app code; the
project's tiers (pcapp's entry points, feedback, annotation, mining, pcapp's shared helpers) import only downwards;
inside each of mining, annotation, feedback and pcapp every module sits in a layer (exhaustive) and imports only
downwards, with siblings of a layer independent where they are; mining's web modules reach the core only through
services and selectors; no import cycles between sibling modules."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
