"""`./run worker`: start only a Celery worker, for a second (or tenth) machine sharing one Postgres, one broker
and one data folder with the others (see docs/DEPLOY.md).

    ./run worker [--concurrency N] [--queues pcapp,embed,index,search,io] [--threads T]

It needs DATABASE_URL and CELERY_BROKER_URL (the same as the web machine's) and PCAPP_DATA_DIR on a file system
every machine mounts (NFS or similar): shard outputs written by one worker are read by others.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import uuid
from pathlib import Path

from pcapp.queues import all_queues, group_queue

ROOT = Path(__file__).resolve().parent.parent


def parse_holds(text: str) -> list[int]:
    """`--holds` as group numbers: "0,2-4" -> [0, 2, 3, 4]; ValueError naming the bad part."""
    out: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()) or (hi and int(hi) < int(lo)):
            raise ValueError(f"--holds: '{part}' is not a group number or a range like 0-3")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(set(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./run worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", "-c", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument(
        "--queues",
        "-Q",
        default=",".join(all_queues()),
        help=f"comma-separated queues to take tasks from (default: all, {','.join(all_queues())})",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("PCAPP_COMPUTE_THREADS", "1")),
        help="compute threads per process (torch, faiss, BLAS); keep threads x concurrency <= cores",
    )
    parser.add_argument(
        "--holds",
        default="",
        help="index-shard groups of compressed runs this machine holds, e.g. 0,1 or 0-3: their search shards come "
        "here first (queues search.g0, ...; PCAPP_PQ_GROUPS groups a side)",
    )
    parser.add_argument("--name", default="", help="node name (default pcapp-<random>@<host>)")
    args = parser.parse_args(argv)
    missing = [name for name in ("DATABASE_URL", "CELERY_BROKER_URL") if not os.environ.get(name)]
    if missing:
        parser.error(
            f"{' and '.join(missing)} not set: a worker joins an existing pcapp (one Postgres, one broker); set them "
            "as on the web machine (docs/DEPLOY.md)"
        )
    if args.concurrency < 1 or args.threads < 1:
        parser.error("--concurrency and --threads must be at least 1")
    queues = [q.strip() for q in args.queues.split(",") if q.strip()]
    if not queues:
        parser.error("--queues is empty")
    try:
        holds = parse_holds(args.holds)
    except ValueError as exc:
        parser.error(str(exc))
    queues += [group_queue(g) for g in holds if group_queue(g) not in queues]
    data_dir = os.environ.get("PCAPP_DATA_DIR", str(ROOT / "var"))
    print(
        f"pcapp worker on {socket.gethostname()}: queues {','.join(queues)}, {args.concurrency} process(es) x "
        f"{args.threads} thread(s), data folder {data_dir} (must be shared by every machine)",
        flush=True,
    )
    env = {**os.environ, "PCAPP_COMPUTE_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    name = args.name or f"pcapp-{uuid.uuid4().hex[:6]}@%h"
    cmd = [
        sys.executable, "-m", "celery", "-A", "pcapp", "worker",
        "-c", str(args.concurrency), "-Q", ",".join(queues), "-n", name, "-l", "INFO",
    ]  # fmt: skip
    os.chdir(ROOT)
    os.execve(sys.executable, cmd, env)
    return 0  # pragma: no cover


if __name__ == "__main__":
    raise SystemExit(main())
