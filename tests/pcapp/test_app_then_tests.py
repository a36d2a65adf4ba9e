"""The README's two commands in its order, on a fresh clone: `./run app` (which creates the embedded Postgres and
Redis under ./var), then `./run tests`, which must pass on those embedded servers, worker and browser tests included.

CI runs `./run tests` on a machine with local servers, where the embedded ones never exist; this test makes the
newcomer's order part of that run. It takes a few minutes (a first `./run app`, then a test database on the
embedded server)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SUBSET = [
    "tests/pcapp/test_launcher.py",
    "tests/pcapp/test_worker.py::test_worker_runs_task_and_result_lands_in_db",
    "tests/browser/test_runs_browser.py::test_start_run_watch_it_finish_and_open_results",
]
"""A worker test, a browser test that also starts a run on a worker, and the launcher's own tests."""
CLEAN_ENV = ("DATABASE_URL", "CELERY_BROKER_URL", "PCAPP_DATA_DIR", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")


def _clone(dest: Path) -> None:
    """A clone of this checkout at its HEAD, with this working tree's uncommitted changes laid over it (so that the
    code under test is the code here), and the virtualenv linked rather than installed again."""
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(dest)], check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True)
    subprocess.run(["git", "checkout", "-q", "--detach", head.stdout.strip()], cwd=dest, check=True)
    changed = subprocess.run(
        ["git", "ls-files", "-z", "--modified", "--others", "--exclude-standard"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split("\0")  # fmt: skip
    for name in filter(None, changed):
        source, target = ROOT / name, dest / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        elif target.exists() and not source.exists():
            target.unlink()
    (dest / ".venv").symlink_to((ROOT / ".venv").resolve())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local http:// address
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.clone
def test_run_tests_passes_after_run_app_made_its_embedded_servers(tmp_path):
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        message = "needs git and a git checkout to clone"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    clone = tmp_path / "clone"
    _clone(clone)
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env["CI"] = "true"  # the inner suite fails rather than skips a browser or worker test
    port = _free_port()
    app_log = tmp_path / "app.log"
    with app_log.open("wb") as out:
        app = subprocess.Popen(
            ["./run", "app", "--no-demo", "--port", str(port)],
            cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 600
            while "pcapp is up" not in app_log.read_text(errors="replace"):
                assert app.poll() is None, "./run app exited:\n" + app_log.read_text(errors="replace")[-4000:]
                assert time.monotonic() < deadline, "./run app did not come up:\n" + app_log.read_text()[-4000:]
                time.sleep(1)
            # "pcapp is up" is printed once the server answers, not before
            assert _answers(f"http://127.0.0.1:{port}/accounts/login/")
        finally:
            app.send_signal(signal.SIGINT)  # Ctrl-C
            try:
                app.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(app.pid, signal.SIGKILL)
                app.wait()
    said = app_log.read_text(errors="replace")
    assert app.returncode == 0, said[-4000:]
    assert (clone / "var" / "postgres" / "PG_VERSION").is_file()
    assert "Redis shutdown failed" not in said and "graceful shutdown failed" not in said

    tests = subprocess.run(
        ["./run", "tests", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}", *SUBSET],
        cwd=clone, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    output = tests.stdout + tests.stderr
    assert tests.returncode == 0, output[-6000:]
    # the inner run used the servers `./run app` created, addressed by their socket folder
    socket_dir = str(clone / "var" / "postgres").replace("/", "%2F")
    assert f"database: postgres://postgres@{socket_dir}/pcapp" in output, output[-3000:]
    summary = re.search(r"^(\d+) passed in ", tests.stdout, re.MULTILINE)  # "N passed", nothing failed or skipped
    assert summary and int(summary.group(1)) >= len(SUBSET), output[-3000:]
