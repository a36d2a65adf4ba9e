"""The tree is ruff-formatted and passes `ruff check` (pyproject.toml's settings), so formatting is never a review
topic."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).parent / "ruff"


def test_tree_is_ruff_formatted() -> None:
    result = subprocess.run([str(RUFF), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_ruff_check_passes() -> None:
    result = subprocess.run([str(RUFF), "check", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
