"""The vector stages of a sentence run (plan, embed, [IVF: train, index], search) and the table of every stage's
shard function (`STAGE_FN`, which the candidate stages complete)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np
from django.conf import settings

from ...core.enums import IndexStore
from ...core.knn import KnnMethod
from ...core.knn.shards import (
    IVF_TRAIN_PER_LIST,
    ivf_assign,
    ivf_fill_shard,
    ivf_nlist,
    ivf_search_shard,
    ivf_train,
    merge_topk,
    row_shards,
    search_exact_shard,
    search_exact_shard_both,
)
from ...core.margin import neighbourhood_means
from ...models import MiningRun
from ..embeddings import embeddings_dir, load_shard, save_shard, shard_path, side_sentences
from ..encoders import encoder_default, load_encoder
from . import pqstages
from .candidates import CANDIDATE_STAGE_FN
from .context import Ctx, sentence_texts, side_corpus, side_embedding, side_ids, training_sample
from .plan import Plan, ShardError, load_npz, save_npy, save_npz, write_atomic

IVF_SEED = 0


def _stage_plan(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    run = ctx.run
    if run.encoder is None:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
        run.refresh_from_db()
    site = ctx.params.site
    src = side_sentences(run.src_corpus, run.src_lang, site=site)
    tgt = side_sentences(run.tgt_corpus, run.tgt_lang, site=site)
    if len(src) == 0 or len(tgt) == 0:
        raise ValueError(
            f"nothing to mine: {len(src)} '{run.src_lang}' sentences in {run.src_corpus}, "
            f"{len(tgt)} '{run.tgt_lang}' sentences in {run.tgt_corpus}" + (f" on site '{site}'" if site else "")
        )
    for side, ids in (("src", src.ids), ("tgt", tgt.ids)):
        write_atomic(ctx.folder / "plan" / f"{side}_ids.npy", lambda tmp, ids=ids: save_npy(tmp, ids))
    shard_rows = int(settings.PCAPP_SHARD_ROWS)
    pq = ctx.params.knn is KnnMethod.IVF and (
        ctx.params.index is IndexStore.PQ
        or (ctx.params.index is IndexStore.AUTO and min(len(src), len(tgt)) >= int(settings.PCAPP_PQ_MIN_ROWS))
    )
    fewest_shards = min(len(row_shards(len(src), shard_rows)), len(row_shards(len(tgt), shard_rows)))
    plan = Plan(
        n_src=len(src),
        n_tgt=len(tgt),
        shard_rows=shard_rows,
        chunk_rows=int(settings.PCAPP_CANDIDATE_CHUNK_ROWS),
        knn=ctx.params.knn.value,
        encoder_id=run.encoder_id,
        **(
            {
                "index": "pq",
                "groups": max(1, min(int(settings.PCAPP_PQ_GROUPS), fewest_shards)),
                "pq_m": int(settings.PCAPP_PQ_BYTES),
                "pq_candidates": int(settings.PCAPP_PQ_CANDIDATES),
            }
            if pq
            else {}
        ),
    )
    return {"plan": plan.__dict__}


def _stage_embed(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    n_src = len(plan.src_shards)
    side, j = ("src", shard_no) if shard_no < n_src else ("tgt", shard_no - n_src)
    start, stop = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    ids = side_ids(ctx, side)[start:stop]
    corpus, lang = side_corpus(ctx, side)
    folder = embeddings_dir(corpus, ctx.run.encoder, lang, ctx.params.site)
    folder.mkdir(parents=True, exist_ok=True)
    path = shard_path(folder, j)
    if load_shard(path, ids) is not None:
        return {"side": side, "rows": int(len(ids)), "cached": True}
    found = sentence_texts(ids)
    missing = [int(i) for i in ids if int(i) not in found]
    if missing:
        raise ShardError(f"{len(missing)} sentences of the plan were deleted (e.g. id {missing[0]}); start a new run")
    ctx.check()
    encoder = load_encoder(ctx.run.encoder)
    save_shard(path, ids, np.asarray(encoder.encode([found[int(i)][0] for i in ids], lang), dtype=np.float32))
    return {"side": side, "rows": int(len(ids)), "cached": False}


def _stage_train(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    if plan.pq:
        return pqstages.stage_train(ctx, shard_no, shard_id)
    nlist = ivf_nlist(max(1, min(plan.n_src, plan.n_tgt)))
    want = IVF_TRAIN_PER_LIST * nlist
    sample = training_sample(ctx, want, IVF_SEED)
    index = ivf_train(sample, nlist, seed=IVF_SEED)
    write_atomic(ctx.folder / "ivf" / "trained.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"nlist": int(index.nlist), "sample": int(len(sample))}


def _index_side(plan: Plan, shard_no: int) -> tuple[str, int]:
    """Index shard n: the target side's shards first (searched by source queries), then the source side's."""
    n_tgt = len(plan.tgt_shards)
    return ("tgt", shard_no) if shard_no < n_tgt else ("src", shard_no - n_tgt)


def _stage_index(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    side, j = _index_side(plan, shard_no)
    if plan.pq:
        return pqstages.stage_index(ctx, side, j)
    start, _ = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    trained = faiss.read_index(str(ctx.folder / "ivf" / "trained.index"))
    index = ivf_fill_shard(trained, side_embedding(ctx, side, j), start)
    write_atomic(ctx.folder / "ivf" / f"{side}-{j:05d}.index", lambda tmp: faiss.write_index(index, str(tmp)))
    return {"side": side, "rows": int(index.ntotal)}


def _search_dir(plan: Plan, shard_no: int) -> tuple[str, int, str]:
    """Search shard n: (direction, query shard, query side); source query shards first."""
    n_src = len(plan.src_shards)
    return ("fwd", shard_no, "src") if shard_no < n_src else ("bwd", shard_no - n_src, "tgt")


def _bwd_part(ctx: Ctx, tgt_shard: int, src_shard: int) -> Path:
    """Where an exact forward search shard leaves a target shard's top-k among one source shard (the shared pass)."""
    return ctx.folder / "search" / f"bwdpart-{tgt_shard:05d}-{src_shard:05d}.npz"


def _shared_bwd(ctx: Ctx, plan: Plan, j: int, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Target shard j's exact top-k merged from the forward shards' shared tile passes; None while one is missing."""
    paths = [_bwd_part(ctx, j, i) for i in range(len(plan.src_shards))]
    if not all(p.exists() for p in paths):
        return None
    parts = [load_npz(p) for p in paths]
    return merge_topk([(p["sims"], p["ids"]) for p in parts], k)


def _stage_search(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    """One query shard's top-k over every index shard of the other side.

    Exact search makes each similarity tile once: a forward shard searches both ways against every target shard
    (``search_exact_shard_both``) and leaves the target rows' lists beside its own; a backward shard merges those
    when every forward shard has left them (always in the in-process order), else searches by itself.
    """
    plan = ctx.need_plan
    if plan.pq:
        return pqstages.stage_search(ctx, shard_no, shard_id)
    direction, j, q_side = _search_dir(plan, shard_no)
    b_side = "tgt" if q_side == "src" else "src"
    base_shards = plan.tgt_shards if b_side == "tgt" else plan.src_shards
    n_base = plan.n_tgt if b_side == "tgt" else plan.n_src
    k = min(ctx.params.k, n_base)
    out = ctx.folder / "search" / f"{direction}-{j:05d}.npz"
    shared = _shared_bwd(ctx, plan, j, k) if not plan.ivf and direction == "bwd" else None
    if shared is not None:
        sims, ids = shared
        save_npz(out, sims=sims, ids=ids, mean=neighbourhood_means(np.where(ids >= 0, sims, -np.inf), k))
        return {"direction": direction, "rows": int(len(sims)), "index_shards": 0, "shared_pass": True}
    queries = side_embedding(ctx, q_side, j)
    q_start = (plan.src_shards if q_side == "src" else plan.tgt_shards)[j][0]
    parts = []
    assign = None
    if plan.ivf:  # the queries' lists under the shared quantizer, once for every index shard
        assign = ivf_assign(faiss.read_index(str(ctx.folder / "ivf" / "trained.index")), queries, ctx.params.nprobe)
    for b, (start, _) in enumerate(base_shards):
        ctx.check()
        if plan.ivf:
            index = faiss.read_index(str(ctx.folder / "ivf" / f"{b_side}-{b:05d}.index"))
            parts.append(ivf_search_shard(index, queries, k, ctx.params.nprobe, assign=assign))
            del index
        elif direction == "fwd":
            fwd, (b_sims, b_ids) = search_exact_shard_both(
                queries, side_embedding(ctx, b_side, b), ctx.params.k, q_start, start
            )
            parts.append(fwd)
            save_npz(_bwd_part(ctx, b, j), sims=b_sims, ids=b_ids)
        else:
            parts.append(search_exact_shard(queries, side_embedding(ctx, b_side, b), k, start))
    sims, ids = merge_topk(parts, k)
    mean = neighbourhood_means(np.where(ids >= 0, sims, -np.inf), k)
    save_npz(out, sims=sims, ids=ids, mean=mean)
    return {"direction": direction, "rows": int(len(queries)), "index_shards": len(base_shards)}


STAGE_FN: dict[str, Callable[[Ctx, int, int], dict]] = {
    "plan": _stage_plan,
    "embed": _stage_embed,
    "train": _stage_train,
    "index": _stage_index,
    "search": _stage_search,
    **CANDIDATE_STAGE_FN,
}
