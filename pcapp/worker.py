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

from pcapp.queues import all_queues

ROOT = Path(__file__).resolve().parent.parent


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
