"""The layering (pyproject.toml's import-linter contracts): the core imports no Django, Celery or app code; mining
imports neither annotation nor feedback; annotation never imports feedback; mining's web, service, data and core
layers import only downwards; no import cycles between sibling modules."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout
