"""The compressed-index stages of a sentence run (``index = pq``): train the IVF-PQ index once, fill one compressed
index shard per side shard, and search a query shard against one GROUP of index shards on a worker that holds it.

Files under the run folder: ``pq/trained.index`` (the trained, empty index), ``pq/<side>-<j>.index`` (a shard's
codes) and ``pq/<side>-<j>.rows.npy`` (its float16 rows, read through a memory map by the exact re-score: only the
candidates' rows are read, and a holder's page cache keeps them), ``search/part-<dir>-<j>-<g>.npz`` (a query shard's
exact top-k among group g) and ``search/<dir>-<j>.npz`` (the groups merged, as the flat path writes it).

Search that goes to the data: the index shards of each side are cut into `plan.groups` groups; search shard
(direction, j, g) searches query shard j against group g. Its task goes to the queue ``<search>.g<g>`` when a live
worker listens there (``./run worker --holds g``), else to the shared ``search`` queue; a worker keeps the groups
it searched in memory (``PCAPP_PQ_HELD_GROUPS``), so a holder reads a group's codes once. When a holder dies, the
keeper re-queues its shard to the shared queue (``sharded_runs_keep``) and any worker does it from the data folder.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from pathlib import Path

import faiss
import numpy as np
from django.conf import settings

from ...core.knn.pq import (
    PQ_TRAIN_PER_LIST,
    PqAssign,
    gather_rows,
    pq_assign,
    pq_fill_shard,
    pq_fit_m,
    pq_merge,
    pq_rotate,
    pq_search_shard,
    pq_train,
    rescore_topk,
)
from ...core.knn.shards import ivf_nlist, merge_topk
from ...core.margin import neighbourhood_means
from .context import Ctx, side_embedding, training_sample
from .plan import Plan, ShardError, load_npz, save_npy, save_npz, write_atomic

logger = logging.getLogger(__name__)

PQ_SEED = 0


def pq_dir(ctx: Ctx) -> Path:
    return ctx.folder / "pq"


def group_shards(n_shards: int, groups: int, g: int) -> list[int]:
    """The index shards (of a side of n_shards) in group g of `groups`: consecutive, sizes differing by one."""
    return [b for b in range(n_shards) if b * groups // n_shards == g]


def search_group_queue(g: int) -> str:
    """The queue of group g's search shards: ``<search queue>.g<g>`` (``./run worker --holds g`` listens there)."""
    from pcapp.queues import group_queue

    return group_queue(g)


_HOLDS_KEY = "pcapp:holds:"


def broker_redis():  # noqa: ANN201 - redis.Redis
    """A redis-py client of the broker's Redis. Kombu's socket form (`redis+socket:///path?virtual_host=n`, which
    `./run app`'s embedded Redis uses) is redis-py's `unix:///path?db=n`."""
    import redis

    url = settings.CELERY_BROKER_URL
    if url.startswith("redis+socket://"):
        url = "unix://" + url[len("redis+socket://") :].replace("virtual_host=", "db=")
    return redis.Redis.from_url(url, socket_timeout=5)


_redis = broker_redis


def holds_announce(queues: list[str]) -> list[int]:
    """Say (in the broker's Redis, for two leases) that this worker listens on these group queues; returns the
    groups. Every worker's keeper calls it every quarter lease, so a dead holder drops out within two leases."""
    from ..jobs import lease_seconds, worker_name

    prefix = search_group_queue(0)[:-1]
    groups = [int(q[len(prefix) :]) for q in queues if q.startswith(prefix) and q[len(prefix) :].isdigit()]
    if groups:
        client = _redis()
        for g in groups:
            client.set(f"{_HOLDS_KEY}{prefix}{g}:{worker_name()}", "1", ex=max(1, int(2 * lease_seconds())))
    return groups


def held_groups() -> dict[int, str]:
    """{group: its queue} for the index groups some live worker announced it holds (``holds_announce``)."""
    prefix = search_group_queue(0)[:-1]
    out: dict[int, str] = {}
    for key in _redis().scan_iter(match=f"{_HOLDS_KEY}{prefix}*", count=1000):
        queue = key.decode()[len(_HOLDS_KEY) :].rsplit(":", 2)[0]
        tail = queue[len(prefix) :]
        if tail.isdigit():
            out[int(tail)] = queue
    return out


def search_target(plan: Plan, shard_no: int) -> tuple[str, int, int]:
    """Search shard n of a compressed run: (direction, query shard, group); source query shards first."""
    n_src = len(plan.src_shards) * plan.groups
    direction, rest = ("fwd", shard_no) if shard_no < n_src else ("bwd", shard_no - n_src)
    return direction, rest // plan.groups, rest % plan.groups


def stage_train(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    """The IVF-PQ index trained on a seeded sample of both sides (as the IVF-Flat quantizer's sample)."""
    plan = ctx.need_plan
    nlist = ivf_nlist(max(1, min(plan.n_src, plan.n_tgt)))
    want = PQ_TRAIN_PER_LIST * nlist
    sample = training_sample(ctx, want, PQ_SEED)
    if len(sample) < 256:
        raise ShardError(f"a compressed (pq) index needs at least 256 sentences to train on, the run has {len(sample)}")
    m = pq_fit_m(sample.shape[1], plan.pq_m)
    index = pq_train(sample, nlist, m=m, seed=PQ_SEED)
    write_atomic(pq_dir(ctx) / "trained.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"nlist": int(faiss.extract_index_ivf(index).nlist), "sample": len(sample), "code_bytes": m}


def stage_index(ctx: Ctx, side: str, j: int) -> dict:
    """Fill index shard j of `side` from the trained index; keep its float16 rows beside it for the re-score."""
    plan = ctx.need_plan
    start, _ = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    trained = faiss.read_index(str(pq_dir(ctx) / "trained.index"))
    emb = side_embedding(ctx, side, j)
    assign = pq_assign(trained, emb, ctx.params.nprobe)  # filed in the first list; the rest steer its searches
    index = pq_fill_shard(trained, emb, start, assign=assign)
    rows = emb.astype(np.float16)
    write_atomic(
        pq_dir(ctx) / f"{side}-{j:05d}.assign.npz",
        lambda tmp: save_npz_plain(tmp, dis=assign.dis, lists=assign.lists.astype(np.int32)),
    )
    write_atomic(pq_dir(ctx) / f"{side}-{j:05d}.rows.npy", lambda tmp: save_npy(tmp, rows))
    write_atomic(pq_dir(ctx) / f"{side}-{j:05d}.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"side": side, "rows": int(index.ntotal)}


# The groups this process holds: (run, side, group) -> (merged codes, row blocks); least recently used out first.
_held: OrderedDict[tuple[int, str, int], tuple[faiss.Index, list[tuple[int, np.ndarray]], int]] = OrderedDict()


def _group(ctx: Ctx, side: str, g: int) -> tuple[faiss.Index, list[tuple[int, np.ndarray]], int]:
    """(the group's shards as one index, their float16 rows as memory maps, index bytes read now: 0 when held)."""
    key = (ctx.run.pk, side, g)
    if key in _held:
        _held.move_to_end(key)
        return _held[key]
    plan = ctx.need_plan
    shards = plan.src_shards if side == "src" else plan.tgt_shards
    members = group_shards(len(shards), plan.groups, g)
    indexes, blocks, read = [], [], 0
    for b in members:
        path = pq_dir(ctx) / f"{side}-{b:05d}.index"
        rows_path = pq_dir(ctx) / f"{side}-{b:05d}.rows.npy"
        if not path.exists() or not rows_path.exists():
            raise ShardError(f"{path} is missing (the data folder must be shared by every worker); retry the run")
        read += path.stat().st_size
        indexes.append(faiss.read_index(str(path)))
        blocks.append((shards[b][0], np.load(rows_path, mmap_mode="r")))
    entry = (pq_merge(indexes), blocks, read)
    _held[key] = (entry[0], entry[1], 0)
    while len(_held) > max(1, int(getattr(settings, "PCAPP_PQ_HELD_GROUPS", 4))):
        _held.popitem(last=False)
    return entry


def _part(ctx: Ctx, direction: str, j: int, g: int) -> Path:
    return ctx.folder / "search" / f"part-{direction}-{j:05d}-{g:03d}.npz"


def merged_topk(ctx: Ctx, plan: Plan, direction: str, j: int, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Query shard j's top-k merged from its groups' parts (exact lists: merged as the flat path merges shards);
    None while a part is missing."""
    paths = [_part(ctx, direction, j, g) for g in range(plan.groups)]
    if not all(p.exists() for p in paths):
        return None
    parts = [load_npz(p) for p in paths]
    return merge_topk([(p["sims"], p["ids"]) for p in parts], k)


def stage_search(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    """Query shard j against group g: compressed candidates (k_cand a query), re-scored exactly, top-k kept; the
    shard that leaves a query shard's last part merges its groups into ``search/<dir>-<j>.npz``."""
    plan = ctx.need_plan
    direction, j, g = search_target(plan, shard_no)
    q_side, b_side = ("src", "tgt") if direction == "fwd" else ("tgt", "src")
    n_base = plan.n_tgt if b_side == "tgt" else plan.n_src
    k = min(ctx.params.k, n_base)
    t0 = time.perf_counter()
    index, blocks, read = _group(ctx, b_side, g)
    t_load = time.perf_counter() - t0
    queries = side_embedding(ctx, q_side, j)
    ctx.check()
    t0 = time.perf_counter()
    k_cand = max(k, plan.pq_candidates)
    _, cand = pq_search_shard(
        index, queries, k_cand, ctx.params.nprobe, assign=_query_assign(ctx, index, q_side, j, queries)
    )
    t_search = time.perf_counter() - t0
    ctx.check()
    t0 = time.perf_counter()
    sims, ids = rescore_topk(queries, cand, k, gather_rows(blocks))
    t_rescore = time.perf_counter() - t0
    save_npz(_part(ctx, direction, j, g), sims=sims, ids=ids)
    merged = merged_topk(ctx, plan, direction, j, k)
    if merged is not None:
        m_sims, m_ids = merged
        mean = neighbourhood_means(np.where(m_ids >= 0, m_sims, -np.inf), k)
        save_npz(ctx.folder / "search" / f"{direction}-{j:05d}.npz", sims=m_sims, ids=m_ids, mean=mean)
    return {
        "direction": direction,
        "rows": int(len(queries)),
        "group": g,
        "index_bytes_read": int(read),
        "seconds_load": round(t_load, 3),
        "seconds_search": round(t_search, 3),
        "seconds_rescore": round(t_rescore, 3),
        "merged": merged is not None,
    }


def save_npz_plain(tmp: Path, **arrays: np.ndarray) -> None:
    """Write arrays to `tmp` as .npz (a writer for `write_atomic`)."""
    with tmp.open("wb") as fh:
        np.savez(fh, **arrays)


def _query_assign(ctx: Ctx, index: faiss.Index, side: str, j: int, queries: np.ndarray) -> PqAssign:
    """Query shard j's lists as its index stage left them (computed once for every group), else computed now."""
    path = pq_dir(ctx) / f"{side}-{j:05d}.assign.npz"
    nprobe = ctx.params.nprobe
    if path.exists():
        with np.load(path) as data:
            dis, lists = data["dis"], data["lists"]
        if dis.shape == (len(queries), min(nprobe, faiss.extract_index_ivf(index).nlist)):
            return PqAssign(pq_rotate(index, queries), dis, lists.astype(np.int64))
    return pq_assign(index, queries, nprobe)


def query_shard_topk(ctx: Ctx, plan: Plan, direction: str, j: int) -> dict[str, np.ndarray]:
    """Query shard j's merged lists (``search/<dir>-<j>.npz``), merged from its parts if no search shard did."""
    path = ctx.folder / "search" / f"{direction}-{j:05d}.npz"
    if path.exists() or not plan.pq:
        return load_npz(path)
    n_base = plan.n_tgt if direction == "fwd" else plan.n_src
    merged = merged_topk(ctx, plan, direction, j, min(ctx.params.k, n_base))
    if merged is None:
        raise ShardError(f"the search parts of {path.name} are missing; retry the run")
    return {"sims": merged[0], "ids": merged[1]}
