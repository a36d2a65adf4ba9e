"""The calibration package is pure: importing it pulls in no web framework or task queue."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
MODULES = ("baselines", "crossval", "estimates", "hardneg", "head", "metrics")
FORBIDDEN = {"django", "rest_framework", "celery", "pcapp", "annotation"}


def test_importing_calibration_loads_no_django_or_celery() -> None:
    imports = "; ".join(f"import mining.core.calibration.{m}" for m in MODULES)
    code = (
        f"import sys; {imports}\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "assert not bad, bad\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
