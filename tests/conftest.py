"""Shared fixtures: users by role, a real Celery worker process, a private data folder."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pcapp import launcher

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
# No precision-estimate task after each test run (workers started by tests inherit this); the tests of the estimate
# turn it on where they need it.
os.environ["PCAPP_PRECISION_AFTER_RUN"] = "false"


SLOW_FIXTURES = {"celery_worker_process", "celery_workers"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `slow` what starts real worker processes, a browser or a clone of the checkout (the million-row tests carry
    the mark themselves), so that `-m "not slow"` gives a quick run; the default run still runs everything."""
    for item in items:
        if any(item.get_closest_marker(name) for name in ("worker", "browser", "clone")):
            item.add_marker(pytest.mark.slow)
        elif SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _torch_threads_restored() -> Iterator[None]:
    """A test that changes torch's process-wide thread count leaves it as it found it."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    if before is not None:
        sys.modules["torch"].set_num_threads(before)


@pytest.fixture(autouse=True)
def _data_dir(settings, tmp_path: Path) -> Path:
    """Every test gets its own PCAPP_DATA_DIR (and no precision task after its runs)."""
    settings.PCAPP_PRECISION_AFTER_RUN = False
    settings.PCAPP_DATA_DIR = tmp_path / "pcapp-data"
    settings.PCAPP_DATA_DIR.mkdir()
    return settings.PCAPP_DATA_DIR


@pytest.fixture
def register_encoder() -> Iterator:
    """`register_encoder(name, factory)` registers a test encoder; it is unregistered again after the test."""
    from mining.core.encoders.registry import register, unregister

    names: list[str] = []

    def add(name: str, factory) -> None:
        register(name, factory, replace=True)
        names.append(name)

    yield add
    for name in names:
        unregister(name)


@pytest.fixture
def broker_down(monkeypatch) -> None:
    """The task broker cannot be reached: sending a task raises what kombu raises on a refused connection, and the
    broker address that messages name is one where nothing listens. (Repointing the app's connection pools at a dead
    port instead depends on what earlier tests left in kombu's pools.)"""
    from kombu.exceptions import OperationalError

    from pcapp.celery import app

    def refuse(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:1. Connection refused.")

    # Celery reads CELERY_BROKER_URL from the environment before its own setting (the launcher sets it for the tests).
    monkeypatch.setenv("CELERY_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(app, "send_task", refuse)


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user("staff", password="pw-staff-123", is_staff=True)


@pytest.fixture
def reviewer_user(django_user_model):
    from pcapp.roles import reviewers_group

    user = django_user_model.objects.create_user("reviewer", password="pw-reviewer-123")
    user.groups.add(reviewers_group())
    return user


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user("nobody", password="pw-nobody-123")


@pytest.fixture
def staff_client(client, staff_user):
    client.force_login(staff_user)
    return client


@pytest.fixture
def reviewer_client(client, reviewer_user):
    client.force_login(reviewer_user)
    return client


@pytest.fixture
def celery_worker_process(transactional_db, settings, _data_dir, tmp_path) -> Iterator[str]:
    """A real `celery worker` subprocess on the real broker, reading and writing the test database.

    Yields the queue name; send tasks with `.apply_async(queue=...)` or rely on the default queue override.
    """
    from django.db import connection

    queue = f"test-{uuid.uuid4().hex[:8]}"
    url = launcher.database_url(connection.settings_dict)  # the test database, as the worker subprocess reads it
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": queue,
        # a sentence run's shard tasks too (pcapp/queues.py): this worker takes every queue the test sends to
        **{f"PCAPP_QUEUE_{name.upper()}": queue for name in ("embed", "index", "search", "io")},
        "PCAPP_DATA_DIR": str(settings.PCAPP_DATA_DIR),
        "OMP_NUM_THREADS": "1",
    }
    settings.CELERY_TASK_DEFAULT_QUEUE = queue
    from pcapp.celery import app

    app.conf.task_default_queue = queue
    log_path = tmp_path / "celery-worker.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "pcapp",
            "worker",
            "-Q",
            queue,
            "-c",
            "1",
            "-P",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "INFO",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        ready = wait_for(lambda: proc.poll() is not None or "ready." in log_path.read_text(), timeout=90)
        if not ready or proc.poll() is not None:
            raise RuntimeError("celery worker did not start:\n" + log_path.read_text()[-4000:])
        yield queue
    finally:
        app.conf.task_default_queue = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "pcapp")
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def wait_for(predicate, timeout: float = 60.0, interval: float = 0.2) -> bool:
    """Poll `predicate` until it is truthy or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


class WorkerPool:
    """Real `celery worker` subprocesses (solo pool, one process each) sharing the test database, the broker and
    the data folder, on private queues: the default one and one per stage (embed, index, search, io)."""

    def __init__(self, env: dict[str, str], queues: list[str], tmp_path: Path) -> None:
        self.env, self.queues, self.tmp_path = env, queues, tmp_path
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self, n: int = 1, **env: str) -> list[subprocess.Popen]:
        """Start n workers (in parallel) and wait until each says it is ready."""
        started = []
        for _ in range(n):
            log_path = self.tmp_path / f"celery-worker-{len(self.procs)}.log"
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "pcapp", "worker", "-Q", ",".join(self.queues), "-c", "1",
                 "-P", "solo", "-n", f"w{len(self.procs)}-{uuid.uuid4().hex[:6]}@%h", "--without-heartbeat",
                 "--without-gossip", "--without-mingle", "-l", "INFO"],
                cwd=ROOT, env={**self.env, **env}, stdout=log_path.open("wb"), stderr=subprocess.STDOUT,
            )  # fmt: skip
            self.procs.append(proc)
            self.logs.append(log_path)
            started.append((proc, log_path))
        for proc, log_path in started:
            ready = wait_for(lambda p=proc, lp=log_path: p.poll() is not None or "ready." in lp.read_text(), 120)
            if not ready or proc.poll() is not None:
                raise RuntimeError("celery worker did not start:\n" + log_path.read_text()[-4000:])
        return [p for p, _ in started]

    def owner(self, proc: subprocess.Popen) -> str:
        """The lease owner name (host:pid) the worker writes into the rows it holds."""
        import socket

        return f"{socket.gethostname()}:{proc.pid}"

    def kill(self, proc: subprocess.Popen) -> None:
        """kill -9: no clean shutdown, no message handed back."""
        proc.kill()
        proc.wait(timeout=20)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def celery_workers(transactional_db, settings, _data_dir, tmp_path) -> Iterator[WorkerPool]:
    """A factory of real worker processes: `pool.start(3)`, `pool.kill(proc)`; all stopped after the test.

    Leases are short (PCAPP_JOB_LEASE_SECONDS=4, here and in the workers), so a dead worker's shards are taken over
    within seconds. Settings the test changes before `start` (PCAPP_SHARD_ROWS) go to the workers too."""
    from django.db import connection

    from pcapp.celery import app

    tag = f"test-{uuid.uuid4().hex[:8]}"
    stage = {name: f"{tag}-{name}" for name in ("embed", "index", "search", "io")}
    url = launcher.database_url(connection.settings_dict)
    settings.PCAPP_JOB_LEASE_SECONDS = 4
    settings.CELERY_TASK_DEFAULT_QUEUE = tag
    app.conf.task_default_queue = tag
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "CELERY_TASK_DEFAULT_QUEUE": tag,
        **{f"PCAPP_QUEUE_{name.upper()}": queue for name, queue in stage.items()},
        "PCAPP_DATA_DIR": str(settings.PCAPP_DATA_DIR),
        "PCAPP_JOB_LEASE_SECONDS": "4",
        "OMP_NUM_THREADS": "1",
    }
    pool = WorkerPool(env, [tag, *stage.values()], tmp_path)
    original = pool.start

    def start(n: int = 1, **extra: str) -> list[subprocess.Popen]:
        pool.env["PCAPP_SHARD_ROWS"] = str(settings.PCAPP_SHARD_ROWS)
        pool.env["PCAPP_CANDIDATE_CHUNK_ROWS"] = str(settings.PCAPP_CANDIDATE_CHUNK_ROWS)
        return original(n, **extra)

    pool.start = start  # type: ignore[method-assign]
    try:
        yield pool
    finally:
        app.conf.task_default_queue = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "pcapp")
        pool.stop()
