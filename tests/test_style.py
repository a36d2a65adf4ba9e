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


def test_ruff_is_pinned_to_the_version_that_runs() -> None:
    """requirements.txt pins ruff exactly (a new release's rules cannot fail the suite), and the pin is what runs."""
    pins = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines() if line.startswith("ruff")]
    version = subprocess.run([str(RUFF), "--version"], capture_output=True, text=True).stdout.split()[-1]
    assert pins == [f"ruff=={version}"]


def test_slow_tests_are_marked_and_the_default_run_keeps_them() -> None:
    """`-m "not slow"` is the quick run; nothing in the configuration deselects the slow tests by default."""
    import tomllib

    pytest_config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert any(m.startswith("slow:") for m in pytest_config["markers"])
    assert "-m" not in pytest_config["addopts"].split() and "not slow" not in pytest_config["addopts"]
