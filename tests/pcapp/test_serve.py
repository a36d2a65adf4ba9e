"""The web stack `./run app` starts (pcapp/serve.py: Caddy in front of gunicorn), run for real on a free port: idle
half-sent requests do not keep a normal client from being answered, and an anonymous oversized body is refused
from its Content-Length before any of it is sent. No timing is asserted: a stalled server would simply not answer
within the client's generous timeout."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pcapp.serve import caddyfile, stack

ROOT = Path(__file__).resolve().parents[2]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, timeout: float = 20) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=timeout) as r:
        return r.status


@pytest.fixture
def proxy_stack(tmp_path) -> int:
    """The proxy stack with 1 process x 2 threads (so that a handful of stuck connections would stall it)."""
    port = _port()
    env = {**os.environ, "PCAPP_DATA_DIR": str(tmp_path / "data"), "DEBUG": "false", "SECRET_KEY": "s" * 64}
    env.pop("PYTEST_VERSION", None)
    (tmp_path / "data" / "staticfiles").mkdir(parents=True)
    procs = [
        subprocess.Popen(p.argv, cwd=ROOT, env={**env, **p.env}, start_new_session=True, stderr=subprocess.DEVNULL)
        for p in stack("proxy", "127.0.0.1", port, tmp_path / "run", (1, 2))
    ]
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                assert _get(port, 5) == 200
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        yield port
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)


def test_caddyfile_caps_bodies_per_path_and_times_out_slow_headers():
    conf = caddyfile("127.0.0.1", 8000, "unix//x.sock")
    assert "read_header 10s" in conf and "bind 127.0.0.1" in conf
    assert "int({header.Content-Length}) > 12582912" in conf  # everywhere but signed-in uploads
    assert 'respond "request body over 12582912 bytes" 413' in conf


def test_slow_clients_do_not_stall_and_large_anonymous_bodies_are_refused_unread(proxy_stack):
    port = proxy_stack
    idle = []
    try:
        for i in range(40):  # 20 times the app's threads, each a request whose headers never end
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"GET /accounts/login/?idle={i} HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode())
            idle.append(s)
        assert [_get(port) for _ in range(5)] == [200] * 5
        for path in ("/accounts/login/", "/imports/new/", "/api/corpora/import/"):
            with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
                s.sendall(
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                    f"Content-Length: {300 * 1024**2}\r\n\r\n".encode()
                )  # and not a byte of the body: a server that waits for it never answers
                assert s.recv(64).startswith(b"HTTP/1.1 413"), path
    finally:
        for s in idle:
            s.close()
