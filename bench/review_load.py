"""N concurrent reviewers over HTTP against the real server stack: each loads its item card, thinks, judges it and now
and then undoes, for a fixed time. Prints throughput and p50/p95/p99 per request type, then checks the database:
labels = successful judgements - undos, no item judged twice by a reviewer, no item over the campaign's overlap.

    ./run bench review_load.py                                  # 20 and 100 reviewers, 2 s think time, then 0 s
    ./run bench review_load.py --reviewers 20,100,150 --think 2 --duration 60
    ./run bench review_load.py --stack waitress                 # another server stack (pcapp/serve.py)

The server is started by the bench (pcapp.serve.stack, as `./run app` starts it) on a scratch database,
<DATABASE_URL's name>_review_load. The load generator is one asyncio process (aiohttp), so it costs the server
little CPU. Target (issue 29): 100 reviewers judging every 2 s on average, item and label p95 < 100 ms on a quiet
2-core machine, 0 errors, nothing lost.

Beside the wall-clock figures each phase prints the server's CPU per judgement: CPU seconds (user + system) of the
server's processes (gunicorn's master and workers, Caddy, and the Postgres backends serving the bench database, found
by their process titles) over the measured window, divided by the judgements made in it (an item GET and a label
POST each, plus their share of undos). On a machine shared with other jobs the wall-clock figures mostly measure the
other jobs; the CPU per judgement barely moves with the load, so it is the figure to compare changes by. 50
judgements/s on 2 cores leave at most 40 ms of CPU per judgement, all in.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from _django import ROOT, setup

ITEM = re.compile(rb'name="item" value="([^"]+)"')
HX = {"HX-Request": "true"}


@dataclass
class Stats:
    """What the reviewers saw: latencies (ms) per request type after the warm-up, and the outcomes."""

    latency: dict[str, list[float]] = field(default_factory=lambda: {"item": [], "label": [], "undo": []})
    errors: dict[str, int] = field(default_factory=dict)
    judged: int = 0
    judged_measured: int = 0
    """Judgements whose POST started after the warm-up (throughput, CPU per judgement); `judged` counts them all."""
    undone: int = 0
    finished: int = 0

    def error(self, what: str) -> None:
        self.errors[what] = self.errors.get(what, 0) + 1


def prepare(n_reviewers: int, n_items: int, overlap: int, tag: str) -> tuple[int, list[dict[str, str]]]:
    """A campaign of n_items sampled from a run (filled once), reviewed by n_reviewers fresh users; returns its id and
    each reviewer's cookies (a session made directly, no password hashing; a CSRF secret)."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore
    from django.middleware.csrf import _get_new_csrf_string
    from review_latency import fill

    from annotation.services import campaign_create
    from annotation.spec import CampaignSpec
    from mining.models import MiningRun
    from pcapp.roles import reviewers_group

    n_run = max(20_000, 2 * n_items)
    fill(n_run)
    run = MiningRun.objects.filter(name=f"bench-{n_run}").latest("created_at")
    users = []
    group = reviewers_group()
    for i in range(n_reviewers):
        user = get_user_model().objects.create_user(f"load-{tag}-{i}")
        user.groups.add(group)
        users.append(user)
    campaign = campaign_create(
        spec=CampaignSpec(name=f"load {tag}", sample_size=n_items, overlap=overlap, seed=7), runs=[run], reviewers=users
    )
    cookies = []
    for user in users:
        session = SessionStore()
        session[SESSION_KEY] = str(user.pk)
        session[BACKEND_SESSION_KEY] = settings.AUTHENTICATION_BACKENDS[-1]
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        csrf = _get_new_csrf_string()
        cookies.append({settings.SESSION_COOKIE_NAME: session.session_key, settings.CSRF_COOKIE_NAME: csrf})
    return campaign.pk, cookies


async def reviewer(
    http,
    base: str,
    cid: int,
    cookies: dict,
    think: float,
    until: float,
    warm: float,
    p_undo: float,
    stats: Stats,
    rng: random.Random,
) -> None:
    """One reviewer's loop: GET the card, think, POST the verdict, sometimes undo; until time `until`."""
    import aiohttp

    url = f"{base}/review/campaigns/{cid}/"
    post_headers = {**HX, "X-CSRFToken": cookies.get("csrftoken", ""), "Referer": url}
    mine = 0

    async def call(kind: str, method: str, target: str, **kw) -> bytes | None:
        t0 = time.monotonic()
        try:
            async with http.request(method, target, cookies=cookies, **kw) as r:
                body = await r.read()
                status = r.status
        except (TimeoutError, aiohttp.ClientError) as exc:
            stats.error(f"{kind}: {type(exc).__name__}")
            return None
        if t0 >= warm:
            stats.latency[kind].append((time.monotonic() - t0) * 1000)
        if status != 200:
            stats.error(f"{kind}: HTTP {status}")
            return None
        return body

    if think:
        await asyncio.sleep(rng.uniform(0, think))  # arrivals spread over one think time
    while time.monotonic() < until:
        body = await call("item", "GET", url, headers=HX)
        if body is None:
            await asyncio.sleep(1)
            continue
        found = ITEM.search(body)
        if not found:
            stats.finished += 1  # the queue has nothing left for this reviewer
            return
        if think:
            await asyncio.sleep(rng.expovariate(1 / think))
        verdict = "GOOD" if rng.random() < 0.7 else "BAD"
        data = {"item": found.group(1).decode(), "verdict": verdict, "seconds": "2"}
        t_post = time.monotonic()
        if await call("label", "POST", url + "label/", data=data, headers=post_headers) is not None:
            stats.judged += 1
            stats.judged_measured += t_post >= warm
            mine += 1
            if mine and rng.random() < p_undo:
                if await call("undo", "POST", url + "undo/", headers=post_headers) is not None:
                    stats.undone += 1
                    mine -= 1


async def load(
    base: str,
    cid: int,
    cookies: list[dict],
    think: float,
    seconds: float,
    warmup: float,
    p_undo: float,
    meter: CpuMeter | None = None,
) -> tuple[Stats, float, dict[str, float]]:
    """Run every reviewer for `seconds` (+ the warm-up); returns the stats, the measured wall time and the server's
    CPU seconds in the measured window (CpuMeter.stop; empty without a meter)."""
    import aiohttp

    stats = Stats()
    cpu: dict[str, float] = {}
    rng = random.Random(29)
    t0 = time.monotonic()
    warm, until = t0 + warmup, t0 + warmup + seconds
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:
        await asyncio.gather(
            _measure_cpu(meter, warmup, seconds, cpu),
            *(
                reviewer(http, base, cid, c, think, until, warm, p_undo, stats, random.Random(rng.random()))
                for c in cookies
            ),
        )
    return stats, time.monotonic() - warm, cpu


class CpuMeter:
    """CPU seconds used by the server's processes between start() and stop(): the process trees of `roots` (the
    stack: gunicorn master and workers, Caddy) and every Postgres backend whose process title names `dbname`. Sampled
    every `every` s from a thread, keeping each process's last reading, so that backends and workers that come and go
    in the window count too (up to one interval of a process that exits is missed)."""

    def __init__(self, roots: list[int], dbname: str, every: float = 0.25) -> None:
        self.roots, self.dbname, self.every = roots, dbname, every
        self.first: dict[tuple[int, float], tuple[str, float]] = {}
        self.last: dict[tuple[int, float], tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _processes(self):
        import psutil

        for root in self.roots:
            try:
                top = psutil.Process(root)
                yield from (top, *top.children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        marker = f" {self.dbname} "
        for p in psutil.process_iter(["cmdline"]):
            cmd = p.info["cmdline"] or [""]  # a backend's title, padded with empty strings
            if cmd[0].startswith("postgres:") and marker in cmd[0]:
                yield p

    def sample(self) -> dict[tuple[int, float], tuple[str, float]]:
        import psutil

        out = {}
        for p in self._processes():
            try:
                with p.oneshot():
                    t = p.cpu_times()
                    name = "postgres" if p.name().startswith("postgres") else p.name()
                    out[(p.pid, p.create_time())] = (name, t.user + t.system)
            except psutil.NoSuchProcess:
                continue
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.last.update(self.sample())

    def start(self) -> None:
        self.first = self.sample()
        self.last = dict(self.first)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, float]:
        """CPU seconds used in the window per process kind (gunicorn / caddy / postgres) and in all."""
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.last.update(self.sample())
        used: dict[str, float] = {}
        for key, (name, cpu) in self.last.items():
            kind = "gunicorn" if "python" in name or "gunicorn" in name else name
            used[kind] = used.get(kind, 0.0) + cpu - self.first.get(key, (name, 0.0))[1]
        used["all"] = sum(used.values())
        return used


async def _measure_cpu(meter: CpuMeter | None, warmup: float, seconds: float, out: dict) -> None:
    """Start the meter when the warm-up ends and read it when the measured window ends (in the event loop)."""
    if meter is None:
        return
    await asyncio.sleep(warmup)
    loop = asyncio.get_running_loop()
    own0 = time.process_time()
    await loop.run_in_executor(None, meter.start)
    await asyncio.sleep(seconds)
    out.update(await loop.run_in_executor(None, meter.stop))
    out["load generator"] = time.process_time() - own0


def vacuum() -> None:
    """VACUUM ANALYZE the tables every judgement writes, as autovacuum would between phases. Each judgement deletes
    one claim row and inserts another, so without it the dead rows of earlier phases slow the claim's index probes
    (a database server with autovacuum off, as this machine's, keeps all of them)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE annotation_assignment, annotation_label, annotation_campaignitem, django_session")


def check(cid: int, stats: Stats) -> dict[str, int]:
    """The database after the run: labels stored, lost or extra labels, duplicates, items over the overlap."""
    from django.db import connection

    from annotation.models import Campaign, Label

    overlap = Campaign.objects.get(pk=cid).overlap
    labels = Label.objects.filter(campaign_id=cid).count()
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM (SELECT 1 FROM annotation_label WHERE campaign_id = %s "
            "GROUP BY item_id, reviewer_id HAVING count(*) > 1) d",
            [cid],
        )
        dups = cur.fetchone()[0]
        cur.execute(
            "SELECT count(*) FROM (SELECT i.id FROM annotation_campaignitem i "
            "LEFT JOIN annotation_label l ON l.item_id = i.id WHERE i.campaign_id = %s "
            "GROUP BY i.id HAVING count(l.id) > %s) o",
            [cid, overlap],
        )
        over = cur.fetchone()[0]
    return {"labels": labels, "mismatch": labels - (stats.judged - stats.undone), "duplicates": dups, "over": over}


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def report(n: int, think: float, stats: Stats, wall: float, db: dict[str, int], cpu: dict[str, float]) -> bool:
    """Print one phase's line per request type; True when it holds the target (p95 < 100 ms, no error, no loss)."""
    per_s = stats.judged_measured / wall
    ok = not stats.errors and not (db["mismatch"] or db["duplicates"] or db["over"])
    ok = ok and all(pct(stats.latency[k], 0.95) < 100 for k in ("item", "label"))
    print(
        f"\n{n} reviewers, think {think:g} s: {per_s:.1f} judgements/s over {wall:.0f} s "
        f"({stats.judged} judged, {stats.undone} undone, {stats.finished} ran out of items)"
    )
    for kind, xs in stats.latency.items():
        print(
            f"  {kind:<6} n={len(xs):<6} p50 {pct(xs, 0.5):7.1f} ms  p95 {pct(xs, 0.95):7.1f} ms  "
            f"p99 {pct(xs, 0.99):7.1f} ms  max {max(xs, default=float('nan')):7.1f} ms"
        )
    if cpu and stats.judged_measured:
        per = {k: 1000 * v / stats.judged_measured for k, v in cpu.items()}
        parts = ", ".join(f"{k} {per[k]:.1f}" for k in ("gunicorn", "caddy", "postgres") if k in per)
        print(
            f"  server CPU per judgement: {per['all']:.1f} ms ({parts}); server CPU {cpu['all'] / wall:.2f} cores "
            f"busy; load generator {per['load generator']:.1f} ms"
        )
    print(f"  errors: {stats.errors or 0}")
    print(
        f"  database: {db['labels']} labels; lost or extra {db['mismatch']}, judged twice {db['duplicates']}, "
        f"over the overlap {db['over']}  ->  {'HOLDS the target' if ok else 'misses the target'}"
    )
    return ok


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(stack_name: str, port: int, size: tuple[int, int] | None) -> list[subprocess.Popen]:
    """The stack on 127.0.0.1:port with this process's environment (the bench database); waits until it answers."""
    import urllib.request

    from pcapp.serve import stack

    run_dir = Path(tempfile.mkdtemp(prefix="pcapp-load-"))
    log = (run_dir / "server.log").open("w")  # noqa: SIM115 (held open by the server processes)
    (Path(os.environ.get("PCAPP_DATA_DIR", ROOT / "var")) / "staticfiles").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            p.argv, cwd=ROOT, env={**env, **p.env}, start_new_session=True, stdout=log, stderr=log
        )  # the server's own log: run_dir/server.log
        for p in stack(stack_name, "127.0.0.1", port, run_dir, size)
    ]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=2) as r:
                if r.status == 200:
                    return procs
        except OSError:
            time.sleep(0.3)
    stop_server(procs)
    raise SystemExit(f"the {stack_name} stack did not answer on port {port} within 60 s")


def stop_server(procs: list[subprocess.Popen]) -> None:
    for p in reversed(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)


def machine() -> str:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    return f"{platform.node()}: {os.cpu_count()} x {cpu}; load average {' '.join(load)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviewers", default="20,100", help="comma-separated reviewer counts, one phase each")
    parser.add_argument("--think", default="2,0", help="mean think times (s) to run each count with; 0 = saturation")
    parser.add_argument("--duration", type=float, default=60, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=5, help="seconds run before measuring")
    parser.add_argument("--undo", type=float, default=0.05, help="chance of an undo after a judgement")
    parser.add_argument("--overlap", type=int, default=3)
    parser.add_argument("--stack", default="proxy", help="server stack (pcapp/serve.py STACKS)")
    parser.add_argument("--workers", type=int, default=0, help="web processes (default: as ./run app)")
    parser.add_argument("--threads", type=int, default=0, help="threads per web process (default: as ./run app)")
    parser.add_argument("--url", default="", help="use a server already running on this database instead")
    args = parser.parse_args()
    base_db = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1]
    dbname = f"{base_db}_review_load"
    setup(dbname)
    from pcapp.serve import default_size

    size = (args.workers or default_size()[0], args.threads or default_size()[1])
    port = free_port()
    procs = [] if args.url else start_server(args.stack, port, size)
    base = args.url.rstrip("/") or f"http://127.0.0.1:{port}"
    print(machine())
    shape = f"1 process x {size[1]} threads" if args.stack == "waitress" else f"{size[0]} processes x {size[1]} threads"
    print(f"server: {args.url or f'{args.stack}, {shape}'}")
    held = []
    try:
        for think in [float(t) for t in args.think.split(",")]:
            for n in [int(x) for x in args.reviewers.split(",")]:
                need = int(n * (args.duration + args.warmup) * (3 if think == 0 else 1.5 / max(think, 0.1)))
                tag = f"{n}-{think:g}-{time.time():.0f}"
                cid, cookies = prepare(n, max(500, need // args.overlap + n), args.overlap, tag)
                vacuum()
                print(f"\n[{machine()}]", end="")
                meter = CpuMeter([p.pid for p in procs], dbname) if procs else None
                stats, wall, cpu = asyncio.run(
                    load(base, cid, cookies, think, args.duration, args.warmup, args.undo, meter)
                )
                if report(n, think, stats, wall, check(cid, stats), cpu) and think:
                    held.append(n)
        print(f"\nholds the target at: {', '.join(map(str, held)) or 'none'} reviewers   ({machine()})")
    finally:
        stop_server(procs)


if __name__ == "__main__":
    main()
