"""The weight of a web process: resident memory and modules after ``django.setup()`` and loading the URLconf and the
admin, which numeric libraries that pulled in, and the wall time of ``manage.py check`` (a management command's start).

Usage: ``./run python bench/web_weight.py [--repeat 3] [--baseline DIR]``. Each figure comes from a fresh interpreter;
``--baseline`` measures another checkout (e.g. ``git archive <commit> | tar -x -C DIR``) the same way, interleaved
with this one, so that both see the same machine load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMERIC = ("torch", "faiss", "numba", "scipy", "sklearn", "pyarrow", "numpy", "transformers", "sentence_transformers")

PROBE = f"""
import json, os, sys, time
t0 = time.perf_counter()
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns
from django.contrib import admin
admin.autodiscover()
seconds = time.perf_counter() - t0
sys.path.insert(0, "bench")
from _proc import status_kb
print(json.dumps({{
    "rss_kb": status_kb("VmRSS"), "peak_kb": status_kb("VmHWM"), "modules": len(sys.modules), "seconds": seconds,
    "numeric": sorted(m for m in {NUMERIC!r} if m in sys.modules),
}}))
"""


def probe(root: Path) -> dict:
    """One fresh interpreter's weight after setup + URLconf + admin."""
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=root, capture_output=True, text=True, env=os.environ.copy())
    if out.returncode:
        raise SystemExit(f"{root}: the probe failed\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_seconds(root: Path) -> float:
    """Wall seconds of ``manage.py check`` in a fresh interpreter."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "manage.py", "check"], cwd=root, check=True, capture_output=True)
    return time.perf_counter() - t0


def report(name: str, probes: list[dict], checks: list[float]) -> None:
    """Print one checkout's figures."""
    rss = statistics.median(p["rss_kb"] for p in probes) / 1024
    setup_s = statistics.median(p["seconds"] for p in probes)
    print(f"{name}: web process after django.setup() + URLconf + admin: RSS {rss:.0f} MiB (median of {len(probes)}),")
    print(f"  {probes[0]['modules']} modules, setup {setup_s:.2f} s, numeric libraries loaded: {probes[0]['numeric']}")
    median, fastest = statistics.median(checks), min(checks)
    print(f"  manage.py check: median {median:.2f} s, min {fastest:.2f} s over {len(checks)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure the same way (before)")
    args = parser.parse_args()
    roots = {"this checkout": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    load = os.getloadavg()
    probes: dict[str, list[dict]] = {name: [] for name in roots}
    checks: dict[str, list[float]] = {name: [] for name in roots}
    for _ in range(args.repeat):
        for name, root in roots.items():
            probes[name].append(probe(root))
            checks[name].append(check_seconds(root))
    for name in roots:
        report(name, probes[name], checks[name])
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
