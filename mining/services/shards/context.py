"""What a shard function reads: its context (run, parameters, plan, folder) and the sentences and embeddings of a
side shard."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.db import connection

from ...models import MiningRun
from ..embeddings import embeddings_dir, load_shard, shard_path
from ..params import SentenceRunParams
from .plan import Plan, ShardError


@dataclass(frozen=True)
class Ctx:
    """What a shard function reads: the run, its parameters, its plan (None for the plan shard) and its folder."""

    run: MiningRun
    params: SentenceRunParams
    plan: Plan | None
    folder: Path
    check: Callable[[], None]  # raises JobCancelled when the run was cancelled

    @property
    def need_plan(self) -> Plan:
        if self.plan is None:
            raise ShardError("the run has no plan yet")
        return self.plan


def side_ids(ctx: Ctx, side: str) -> np.ndarray:
    """The planned sentence ids of one side ('src' or 'tgt'), in row order."""
    return np.load(ctx.folder / "plan" / f"{side}_ids.npy")


def side_corpus(ctx: Ctx, side: str) -> tuple[Any, str]:
    """(corpus, language) of one side of the run."""
    run = ctx.run
    return (run.src_corpus, run.src_lang) if side == "src" else (run.tgt_corpus, run.tgt_lang)


def side_embedding(ctx: Ctx, side: str, j: int) -> np.ndarray:
    """The float32 (float16-valued) embeddings of one side shard, from the embedding cache."""
    plan = ctx.need_plan
    start, stop = (plan.src_shards if side == "src" else plan.tgt_shards)[j]
    corpus, lang = side_corpus(ctx, side)
    path = shard_path(embeddings_dir(corpus, ctx.run.encoder, lang, ctx.params.site), j)
    emb = load_shard(path, side_ids(ctx, side)[start:stop])
    if emb is None:
        raise ShardError(f"embedding shard {path} is missing or holds other sentences; retry the run")
    return emb


def training_sample(ctx: Ctx, want: int, seed: int) -> np.ndarray:
    """A seeded sample of up to `want` embedding rows of both sides (half from the source side, the rest from the
    target side), in row order per side: what an index's quantizer trains on (IVF-Flat and IVF-PQ alike)."""
    plan = ctx.need_plan
    rng = np.random.default_rng(seed)
    parts = []
    for side, n, shards, take in (
        ("src", plan.n_src, plan.src_shards, min(plan.n_src, want // 2)),
        ("tgt", plan.n_tgt, plan.tgt_shards, min(plan.n_tgt, want - min(plan.n_src, want // 2))),
    ):
        rows = np.sort(rng.choice(n, take, replace=False))
        for j, (start, stop) in enumerate(shards):
            sel = rows[(rows >= start) & (rows < stop)] - start
            if len(sel):
                parts.append(side_embedding(ctx, side, j)[sel])
            ctx.check()
    return np.concatenate(parts)


def sentence_texts(ids: np.ndarray) -> dict[int, tuple[str, str]]:
    """{sentence id: (text, detected language)} for the given ids (one query, any number of ids)."""
    with connection.cursor() as cur:
        cur.execute("SELECT id, text, detected_lang FROM mining_sentence WHERE id = ANY(%s)", [[int(i) for i in ids]])
        return {row[0]: (row[1], row[2]) for row in cur.fetchall()}
