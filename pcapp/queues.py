"""The Celery queues pcapp uses, read from the environment (no Django needed, so the launcher can use it too).

The default queue (CELERY_TASK_DEFAULT_QUEUE, "pcapp") takes whole jobs and light tasks; a sentence run's shard
tasks go to one queue per kind of work, so a deployer can give each its own machines (`./run worker --queues`):

    embed   encoding sentences (CPU or GPU bound)
    index   training the IVF quantizer and filling index shards (memory bound)
    search  searching query shards against index shards (CPU bound, the bulk of a large run)
    io      scoring, filtering, writing candidates to Postgres and finishing (database bound)

Each name can be changed with PCAPP_QUEUE_<NAME> (e.g. PCAPP_QUEUE_SEARCH=search-big).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

STAGE_QUEUES = ("embed", "index", "search", "io")


def default_queue(environ: Mapping[str, str] = os.environ) -> str:
    """The queue of whole jobs and light tasks."""
    return environ.get("CELERY_TASK_DEFAULT_QUEUE") or "pcapp"


def stage_queue(name: str, environ: Mapping[str, str] = os.environ) -> str:
    """The queue of one kind of shard work (`embed`, `index`, `search` or `io`)."""
    if name not in STAGE_QUEUES:
        raise ValueError(f"unknown queue {name!r}; pcapp's stage queues are {', '.join(STAGE_QUEUES)}")
    return environ.get(f"PCAPP_QUEUE_{name.upper()}") or name


def group_queue(g: int, environ: Mapping[str, str] = os.environ) -> str:
    """The queue of the search shards of index-shard group g of a compressed run: `<search queue>.g<g>`, which the
    workers that hold group g listen on (`./run worker --holds g`)."""
    if int(g) < 0:
        raise ValueError(f"an index group is a number >= 0, got {g}")
    return f"{stage_queue('search', environ)}.g{int(g)}"


def all_queues(environ: Mapping[str, str] = os.environ) -> list[str]:
    """Every queue pcapp sends to, default first (what a worker that does everything listens on)."""
    names = [default_queue(environ), *(stage_queue(q, environ) for q in STAGE_QUEUES)]
    return list(dict.fromkeys(names))
