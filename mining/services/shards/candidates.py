"""The candidate stages of a sentence run (score, filter, write, finish), its pre-filters and the COPY rows of its
candidates (shared with nothing else: a sentence run's own)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from django.db import transaction
from django.utils import timezone

from ...core.candidates import mine_candidates
from ...core.enums import Rescore
from ...core.evidence_rescore import candidate_neighbours
from ...core.filters import FilterReason, apply_filters, check_language
from ...core.hw import knn_path
from ...core.types import Candidates, Direction, KnnResult
from ...db.bulk import copy_rows
from ...ingest.langid import detect_with_probability
from ...models import MiningRun, RunShard, SentencePairCandidate
from ..default_threshold import default_threshold_for_run
from ..jobs import job_mark_finished
from ..params import SentenceRunParams
from ..precision import precision_after_run
from ..rescore import STATS_KEY as RESCORE_KEY
from ..rescore import rescore_run
from .context import Ctx, sentence_texts, side_ids
from .plan import ShardError, load_npz, save_npz, write_atomic
from .pqstages import query_shard_topk
from .rows import chunk_count, record_stage_timing, run_rows, stage_counts


def _knn(ctx: Ctx) -> KnnResult:
    plan = ctx.need_plan
    out = {}
    for direction, shards in (("fwd", plan.src_shards), ("bwd", plan.tgt_shards)):
        parts = [query_shard_topk(ctx, plan, direction, j) for j in range(len(shards))]
        out[direction] = (np.concatenate([p["sims"] for p in parts]), np.concatenate([p["ids"] for p in parts]))
    return KnnResult(fwd_sims=out["fwd"][0], fwd_ids=out["fwd"][1], bwd_sims=out["bwd"][0], bwd_ids=out["bwd"][1])


CAND_FIELDS = ("src_idx", "tgt_idx", "cosine", "score", "fwd_mean", "bwd_mean", "rank", "direction")


def _stage_score(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    p = ctx.params
    knn = _knn(ctx)
    # a re-scored run's threshold is one on the scorer's log-odds, applied where its kept set is read, not here
    cut = p.threshold if p.rescore is Rescore.NONE else None
    cands = mine_candidates(knn, margin=p.margin, k=p.k, strategy=p.strategy, threshold=cut)
    k = knn.k
    save_npz(
        ctx.folder / "cands.npz",
        **{name: getattr(cands, name) for name in CAND_FIELDS},
        fwd_ids=knn.fwd_ids[cands.src_idx, :k],
        fwd_sims=knn.fwd_sims[cands.src_idx, :k],
        bwd_ids=knn.bwd_ids[cands.tgt_idx, :k],
        bwd_sims=knn.bwd_sims[cands.tgt_idx, :k],
    )
    if p.rescore is Rescore.EVIDENCE:  # the scorer's negatives, read in the finish stage
        save_npz(ctx.folder / "neighbours.npz", **candidate_neighbours(knn, cands, p.k, p.margin))
    return {"candidates": len(cands), "chunks": math.ceil(len(cands) / plan.chunk_rows)}


def _chunk(ctx: Ctx, c: int) -> tuple[dict[str, np.ndarray], int, int]:
    data = load_npz(ctx.folder / "cands.npz")
    m = len(data["src_idx"])
    a, b = c * ctx.need_plan.chunk_rows, min(m, (c + 1) * ctx.need_plan.chunk_rows)
    return {name: arr[a:b] for name, arr in data.items()}, a, b


def _cands(data: dict[str, np.ndarray]) -> Candidates:
    return Candidates(**{name: data[name] for name in CAND_FIELDS})


def _stage_filter(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    data, a, b = _chunk(ctx, shard_no)
    cands = _cands(data)
    s_db, t_db = side_ids(ctx, "src")[cands.src_idx], side_ids(ctx, "tgt")[cands.tgt_idx]
    texts = sentence_texts(np.concatenate([s_db, t_db]))
    src = [texts[int(i)] for i in s_db]
    tgt = [texts[int(i)] for i in t_db]
    reasons, language = filter_reasons(src, tgt, ctx.run, ctx.params)
    payload = json.dumps({"reasons": reasons, "language": language})
    write_atomic(ctx.folder / "filter" / f"{shard_no:05d}.json", lambda tmp: tmp.write_text(payload, encoding="utf-8"))
    return {"candidates": b - a, "kept": sum(1 for r in reasons if not r)}


def _filtered(ctx: Ctx, c: int) -> dict:
    path = ctx.folder / "filter" / f"{c:05d}.json"
    if not path.exists():
        raise ShardError(f"{path} is missing (the data folder must be shared by every worker); retry the run")
    return json.loads(path.read_text(encoding="utf-8"))


def _stage_write(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    data, a, b = _chunk(ctx, shard_no)
    cands = _cands(data)
    f = _filtered(ctx, shard_no)
    src_ids, tgt_ids = side_ids(ctx, "src"), side_ids(ctx, "tgt")
    with transaction.atomic():
        # the done mark first: it locks the shard row, so a second writer of this chunk waits and then backs off
        if not RunShard.objects.filter(pk=shard_id, finished_at__isnull=True).update(
            finished_at=timezone.now(), lease_expires_at=None
        ):
            return {"candidates": 0, "skipped": True}
        SentencePairCandidate.objects.filter(run_id=ctx.run.pk, rank__gt=a, rank__lte=b).delete()
        written = copy_rows(
            SentencePairCandidate,
            ["run_id", "src_id", "tgt_id", "cosine", "score", "rank", "strategy", "filter_reason", "evidence"],
            candidate_rows(
                run_id=ctx.run.pk,
                cands=cands,
                reasons=f["reasons"],
                language=f["language"],
                neighbours=(data["fwd_ids"], data["fwd_sims"], data["bwd_ids"], data["bwd_sims"]),
                src_ids=src_ids,
                tgt_ids=tgt_ids,
                strategy=ctx.params.strategy.value,
                rank_offset=a,
            ),
            ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "jsonb"],
        )
        RunShard.objects.filter(pk=shard_id).update(result={"candidates": written, "rows": [a, b]})
    return {"candidates": written}


def _stage_finish(ctx: Ctx, shard_no: int, shard_id: int) -> dict:
    plan = ctx.need_plan
    rows = run_rows(ctx.run.pk)
    chunks = chunk_count(rows) or 0
    reasons: list[str] = []
    for c in range(chunks):
        reasons.extend(_filtered(ctx, c)["reasons"])
    stats: dict[str, Any] = {}
    cands = _cands(load_npz(ctx.folder / "cands.npz")) if chunks else _empty_cands()
    if ctx.params.rescore is Rescore.EVIDENCE:
        stats[RESCORE_KEY], rescored_threshold = rescore_run(
            run_id=ctx.run.pk,
            src_lang=ctx.run.src_lang,
            tgt_lang=ctx.run.tgt_lang,
            cands=cands,
            reasons=reasons,
            neighbours=load_npz(ctx.folder / "neighbours.npz") if chunks else _no_neighbours(),
            src_ids=side_ids(ctx, "src"),
            tgt_ids=side_ids(ctx, "tgt"),
            texts_of=sentence_texts,
        )
        if rescored_threshold is not None and ctx.params.threshold is None:
            stats["default_threshold"] = {
                **rescored_threshold,
                "margin": ctx.params.margin.value,
                "k": ctx.params.k,
            }
    if ctx.params.threshold is None and "default_threshold" not in stats:
        stats["default_threshold"] = default_threshold_for_run(
            cands=cands, reasons=reasons, margin=ctx.params.margin.value, k=ctx.params.k
        )
    written = sum(int(r["result"].get("candidates", 0)) for (s, _), r in rows.items() if s == "write")
    knn_compute, knn_device = knn_path()
    stats.update(
        # which search ran and in which arithmetic: exact search in bf16 tiles on a visible GPU, else in int8 or
        # bf16 tiles with an exact re-score where the CPU has such units, else fp32 (hw.knn_path()); IVF: fp32, CPU
        knn={
            "method": "ivf-pq" if plan.pq else "ivf" if plan.ivf else "exact",
            "compute": "fp32" if plan.ivf or plan.pq else knn_compute.value,
            "device": "cpu" if plan.ivf or plan.pq else knn_device.value,
        },
        candidates=written,
        kept_after_filters=sum(1 for r in reasons if not r),
        src_sentences=plan.n_src,
        tgt_sentences=plan.n_tgt,
        shards={stage: n for stage, n in stage_counts(rows).items()},
    )
    if ctx.run.stats.get("distributed"):
        record_stage_timing(ctx.run.pk, rows, "write")
        run = MiningRun.objects.get(pk=ctx.run.pk)
        if job_mark_finished(job=run, stats=stats):
            precision_after_run(run)
    return {"stats": stats}


def _no_neighbours() -> dict[str, np.ndarray]:
    e = np.zeros(0)
    return {"rows": e.astype(np.int64), "tgt": e.astype(np.int64), "cosine": e, "score": e}


def _empty_cands() -> Candidates:
    e = np.zeros(0)
    return Candidates(
        src_idx=e.astype(np.int64),
        tgt_idx=e.astype(np.int64),
        cosine=e.astype(np.float32),
        score=e.astype(np.float32),
        fwd_mean=e.astype(np.float32),
        bwd_mean=e.astype(np.float32),
        rank=e.astype(np.int64),
        direction=e.astype(np.uint8),
    )


def filter_reasons(
    src: list[tuple[str, str]], tgt: list[tuple[str, str]], run: MiningRun, params: SentenceRunParams
) -> tuple[list[str], list[dict | None]]:
    """The name of the first pre-filter rule that fired for each candidate ('' when none), and the language
    evidence of each (the side whose detected language differs, that language and the identifier's probability;
    None when both sides are in their expected language). `src`/`tgt`: (text, detected language) per candidate.
    A wrong-language rejection needs a confident identifier and enough text to judge."""
    if not params.filters or not src:
        return [""] * len(src), [None] * len(src)
    src_texts = [t for t, _ in src]
    tgt_texts = [t for t, _ in tgt]
    src_detected = [d or None for _, d in src]
    tgt_detected = [d or None for _, d in tgt]
    src_prob = _detected_probability(src_texts, src_detected, run.src_lang)
    tgt_prob = _detected_probability(tgt_texts, tgt_detected, run.tgt_lang)
    sides = {"src_lang": run.src_lang, "tgt_lang": run.tgt_lang, "src_detected": src_detected}
    raw = apply_filters(
        src_texts, tgt_texts, **sides, tgt_detected=tgt_detected, src_lang_prob=src_prob, tgt_lang_prob=tgt_prob
    )
    check = check_language(
        src_texts, tgt_texts, **sides, tgt_detected=tgt_detected, src_prob=src_prob, tgt_prob=tgt_prob
    )
    reasons = ["" if r is None else FilterReason(r).value for r in raw]
    return reasons, [check.evidence(i) for i in range(len(src))]


def _detected_probability(texts: list[str], detected: list[str | None], expected: str) -> np.ndarray:
    """The identifier's probability of each text's stored language, where it differs from the expected one (NaN
    elsewhere: those texts are never rejected for their language, so they are not identified again)."""
    prob = np.full(len(texts), np.nan)
    rows = [i for i, d in enumerate(detected) if d and d != expected]
    if rows:
        codes, probs = detect_with_probability([texts[i] for i in rows])
        for i, code, p in zip(rows, codes, probs, strict=True):
            if code == detected[i]:
                prob[i] = p
    return prob


def _neighbours(db_ids: np.ndarray, rows: np.ndarray, sims: np.ndarray) -> list[list[float]]:
    """[[sentence id, similarity], ...] of one side's k nearest neighbours (the competition a pair beat)."""
    return [[int(db_ids[j]), round(float(s), 4)] for j, s in zip(rows, sims, strict=True) if j >= 0]


def candidate_rows(
    *,
    run_id: int,
    cands: Candidates,
    reasons: list[str],
    language: list[dict | None],
    neighbours: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    src_ids: np.ndarray,
    tgt_ids: np.ndarray,
    strategy: str,
    rank_offset: int = 0,
) -> Iterator[tuple]:
    """The COPY rows of a run's candidates (rank 1 = best score), with their evidence."""
    fwd_ids, fwd_sims, bwd_ids, bwd_sims = neighbours
    s_db, t_db = src_ids[cands.src_idx], tgt_ids[cands.tgt_idx]
    for i in range(len(cands)):
        evidence: dict[str, Any] = {
            "cosine": round(float(cands.cosine[i]), 5),
            "fwd_mean": round(float(cands.fwd_mean[i]), 5),
            "bwd_mean": round(float(cands.bwd_mean[i]), 5),
            "margin": round(float(cands.score[i]), 5),
            "rank_in_src_neighbours": int(cands.rank[i]),
            "directions": [d.name.lower() for d in Direction if int(cands.direction[i]) & d.value],
            "src_neighbours": _neighbours(tgt_ids, fwd_ids[i], fwd_sims[i]),
            "tgt_neighbours": _neighbours(src_ids, bwd_ids[i], bwd_sims[i]),
        }
        if reasons[i]:
            evidence["filter"] = reasons[i]
        if language[i] is not None:
            evidence["language"] = language[i]
        yield (
            run_id,
            int(s_db[i]),
            int(t_db[i]),
            float(cands.cosine[i]),
            float(cands.score[i]),
            rank_offset + i + 1,
            strategy,
            reasons[i],
            evidence,
        )


# The shard functions of the candidate stages (completing stages.STAGE_FN).
CANDIDATE_STAGE_FN: dict[str, Callable[[Ctx, int, int], dict]] = {
    "score": _stage_score,
    "filter": _stage_filter,
    "write": _stage_write,
    "finish": _stage_finish,
}
