"""Site-restricted document runs as shard tasks: pages are compared only with pages of their own site, and the sites
are spread over the workers.

    plan (1) -> match (one shard per batch of sites, `core.docsites.pack_groups`) -> write (1)

`plan` lists each side's documents with their site (registered domain) or host and batches the sites both sides have
into shards of about PCAPP_SITE_SHARD_DOCS documents (a larger site alone). A `match` shard loads only its sites'
sentences, embeds them (cached per shard under the embeddings folder), runs the run's method inside each site (with
the URL language-marker signal for rerank) and saves its pairs under PCAPP_DATA_DIR/runs/run-<id>/sites/. `write`
puts the shards' pairs together and COPYs them as the run's candidates, with the figures on held-out gold pairs.

Each shard is a `RunShard` row claimed under a lease, as a sentence run's are (`shards.rows`): on Celery every shard is
a task `mining.site_shard` on the `search` queue, the shard that completes a stage dispatches the next one, and the
keeper thread of every worker (`site_runs_keep`) renews the run's lease and re-queues shards whose holder died;
in one process (`site_run_inline`) the same shard functions run one after the other.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import numpy as np
from django.conf import settings
from django.utils import timezone

from pcapp.celery import app as celery_app

from ..core.doc_evaluation import selection_figures
from ..core.docmethod import DocMethod
from ..core.docrun import DocMatchConfig, DocumentMatch, match_documents
from ..core.docsites import Group, Matcher, SiteScope, match_groups, pack_groups, site_groups
from ..models import Document, JobStatus, MiningRun, RunKind, RunShard
from ..params import DocumentRunParams
from .jobs import job_mark_failed, job_mark_finished, lease_seconds
from .progress import JobCancelled, ProgressReporter
from .shards.plan import load_npz, run_dir, save_npz, write_atomic
from .shards.rows import done_count, record_stage_timing, run_rows, shard_claim, shard_done, shard_release

logger = logging.getLogger(__name__)

STAGES = ("plan", "match", "write")
SITE_SHARD_TASK = "mining.site_shard"


def run_scope(run: MiningRun, params: DocumentRunParams) -> SiteScope:
    """The run's site scope: as set, else SITE when both corpora hold crawled pages (documents with a site), else
    ALL."""
    if params.site_scope is not None:
        return params.site_scope
    crawled = all(Document.objects.filter(corpus=c).exclude(site="").exists() for c in {run.src_corpus, run.tgt_corpus})
    return SiteScope.SITE if crawled else SiteScope.ALL


def is_site_run(run: MiningRun) -> bool:
    """True for a document run that matches within sites (what `pcapp.jobs` asks to shard it)."""
    if run.kind != RunKind.DOCUMENT:
        return False
    from .document_runs import document_run_params

    return run_scope(run, document_run_params(run.params)) is not SiteScope.ALL


def execute_document_any(run: MiningRun, reporter: ProgressReporter) -> dict:
    """The DOCUMENT handler in one process: within sites (`site_run_inline`) or across every page."""
    from .document_runs import execute_document_run

    return site_run_inline(run, reporter) if is_site_run(run) else execute_document_run(run, reporter)


# -- the stages ------------------------------------------------------------------------------------------------
def _side_docs(corpus, lang: str, scope: SiteScope) -> tuple[np.ndarray, list[str]]:
    rows = list(
        Document.objects.filter(corpus=corpus, lang=lang, n_sentences__gt=0)
        .order_by("id")
        .values_list("id", "host" if scope is SiteScope.HOST else "site")
    )
    return np.asarray([r[0] for r in rows], np.int64), [r[1] or "" for r in rows]


def _stage_plan(run: MiningRun, p: DocumentRunParams, folder) -> dict:
    from .encoders import encoder_default

    if run.encoder is None and p.method.reads_sentence_embeddings:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
    scope = run_scope(run, p)
    s_ids, s_keys = _side_docs(run.src_corpus, run.src_lang, scope)
    t_ids, t_keys = _side_docs(run.tgt_corpus, run.tgt_lang, scope)
    groups = site_groups(s_keys, t_keys)
    if not groups:
        raise ValueError(
            f"nothing to match: no site has both '{run.src_lang}' and '{run.tgt_lang}' pages "
            f"({len(s_ids)} and {len(t_ids)} pages, scope '{scope.value}')"
        )
    shards = pack_groups(groups, int(settings.PCAPP_SITE_SHARD_DOCS))
    arrays: dict[str, np.ndarray] = {"src_ids": s_ids, "tgt_ids": t_ids}
    for n, g in enumerate(groups):
        arrays[f"g{n}_src"], arrays[f"g{n}_tgt"] = g.src, g.tgt
    save_npz(folder / "plan.npz", **arrays)
    meta = {"keys": [g.key for g in groups], "shards": shards, "scope": scope.value}
    write_atomic(folder / "plan.json", lambda tmp: tmp.write_text(json.dumps(meta), encoding="utf-8"))
    in_sites = sum(g.size for g in groups)
    return {
        "shards": len(shards),
        "sites": len(groups),
        "src_documents": int(len(s_ids)),
        "tgt_documents": int(len(t_ids)),
        "documents_in_shared_sites": int(in_sites),
        "scope": scope.value,
    }


def _plan(folder) -> tuple[dict[str, np.ndarray], dict]:
    return load_npz(folder / "plan.npz"), json.loads((folder / "plan.json").read_text(encoding="utf-8"))


def _stage_match(run: MiningRun, p: DocumentRunParams, folder, shard_no: int, check) -> dict:
    from .document_runs import doc_side_of, doc_urls, embed_doc_side

    arrays, meta = _plan(folder)
    numbers = meta["shards"][shard_no]
    groups = [Group(meta["keys"][n], arrays[f"g{n}_src"], arrays[f"g{n}_tgt"]) for n in numbers]
    s_rows = np.unique(np.concatenate([g.src for g in groups]))
    t_rows = np.unique(np.concatenate([g.tgt for g in groups]))
    s_ids, t_ids = arrays["src_ids"][s_rows], arrays["tgt_ids"][t_rows]
    src, tgt = doc_side_of(s_ids), doc_side_of(t_ids)
    local = [Group(g.key, np.searchsorted(s_rows, g.src), np.searchsorted(t_rows, g.tgt)) for g in groups]
    check()
    s_emb = t_emb = None
    if p.method.reads_sentence_embeddings:
        variant = f"sites-{run_scope(run, p).value}-{shard_no:05d}"  # the same plan reuses its shards
        s_emb = embed_doc_side(run, run.src_corpus, run.src_lang, src, None, variant=variant)
        check()
        t_emb = embed_doc_side(run, run.tgt_corpus, run.tgt_lang, tgt, None, variant=variant)
        check()
    config, matcher = _group_matcher(run, p)
    urls = None
    if p.method is DocMethod.RERANK and config.url_weight > 0:
        (s_urls, s_langs), (t_urls, t_langs) = doc_urls(s_ids), doc_urls(t_ids)
        urls = (s_urls, t_urls, s_langs, t_langs)
    result = match_groups(src.documents(s_emb), tgt.documents(t_emb), local, config, matcher, urls=urls)
    _save_result(folder / "sites" / f"match-{shard_no:05d}", result, src.doc_ids, tgt.doc_ids)
    return {"sites": len(groups), "pairs": len(result), "documents": int(len(s_ids) + len(t_ids)), **_numbers(result)}


def _group_matcher(run: MiningRun, p: DocumentRunParams) -> tuple[DocMatchConfig, Matcher]:
    """The run's method on one site's two sides: its document model or Sentence-Avg, the pre-filter, and the vote's
    calibrated f1 on that site's sentences; nothing learnt from gold pairs (the run's set or default weights)."""
    from ..core.docfilter import document_stats
    from .document_runs import _embedder_for, match_config
    from .vote_calibration import vote_calibration

    config = match_config(p)
    embedder, _ = _embedder_for(p, run)
    uses_vote = p.method in (DocMethod.SENTENCE_VOTE, DocMethod.RERANK)
    vote = vote_calibration(run) if uses_vote else None

    def matcher(src, tgt, cfg: DocMatchConfig, urls) -> DocumentMatch:
        stats = None
        if p.prefilter and src.sentences is not None and tgt.sentences is not None:
            stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
        confidence = None
        if vote is not None and vote.model is not None:
            s_emb, t_emb = src.emb, tgt.emb
            confidence = lambda sims, ids: vote.f1(s_emb, t_emb, sims, ids)  # noqa: E731
        return match_documents(
            p.method,
            src,
            tgt,
            cfg,
            embedder=embedder,
            doc_stats=stats,
            confidence=confidence,
            f1_label=vote.label if vote else "cosine",
            urls=urls,
        )

    return config, matcher


def _numbers(result: DocumentMatch) -> dict:
    return {k: v for k, v in result.stats.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def _save_result(base, result: DocumentMatch, s_ids: np.ndarray, t_ids: np.ndarray) -> None:
    """A shard's pairs as document ids (and its raw ranking as target document ids, -1 padding)."""
    ranked = np.where(result.ranked >= 0, t_ids[np.maximum(result.ranked, 0)], -1)
    save_npz(
        base.with_suffix(".npz"),
        src=s_ids[result.src],
        tgt=t_ids[result.tgt],
        cosine=result.cosine,
        score=result.score,
        reason=np.asarray([str(r) for r in result.filter_reason], dtype=str),
        ranked_src=s_ids,
        ranked=ranked,
    )
    payload = json.dumps({"evidence": result.evidence, "stats": result.stats})
    write_atomic(base.with_suffix(".json"), lambda tmp: tmp.write_text(payload, encoding="utf-8"))


def _stage_write(run: MiningRun, p: DocumentRunParams, folder) -> dict:
    from .document_runs import gold_doc_pairs, write_doc_candidates

    arrays, meta = _plan(folder)
    parts = [load_npz(folder / "sites" / f"match-{n:05d}.npz") for n in range(len(meta["shards"]))]
    extra = [json.loads((folder / "sites" / f"match-{n:05d}.json").read_text()) for n in range(len(meta["shards"]))]
    s_ids, t_ids = arrays["src_ids"], arrays["tgt_ids"]
    s_index = {int(d): i for i, d in enumerate(s_ids)}
    t_index = {int(d): i for i, d in enumerate(t_ids)}
    ranked = np.full((len(s_ids), 10), -1, np.int64)
    for part in parts:
        rows = np.asarray([s_index[int(d)] for d in part["ranked_src"]], np.int64)
        r = part["ranked"][:, :10]
        ranked[rows, : r.shape[1]] = (
            np.vectorize(lambda d: t_index.get(int(d), -1), otypes=[np.int64])(r) if r.size else r
        )
    cat = {k: np.concatenate([pt[k] for pt in parts]) for k in ("src", "tgt", "cosine", "score", "reason")}
    evidence = [ev for e in extra for ev in e["evidence"]]
    order = np.argsort(-cat["score"], kind="stable")
    result = DocumentMatch(
        np.asarray([s_index[int(d)] for d in cat["src"][order]], np.int64),
        np.asarray([t_index[int(d)] for d in cat["tgt"][order]], np.int64),
        cat["cosine"][order],
        cat["score"][order],
        cat["reason"][order].astype(object),
        [evidence[i] for i in order.tolist()],
        ranked,
    )
    written = write_doc_candidates(run, result, s_ids, t_ids)
    gold = {
        s_index[s]: t_index[t]
        for s, t in gold_doc_pairs(run.src_corpus, run.src_lang, run.tgt_lang)
        if s in s_index and t in t_index
    }
    note = f"{len(gold)} gold pairs, all held out (a site-restricted run learns nothing from gold pairs)"
    totals: dict[str, Any] = {}
    for e in extra:
        for k, v in e["stats"].items():
            if isinstance(v, int | float) and not isinstance(v, bool) and k.startswith(("candidates", "url", "sites")):
                totals[k] = totals.get(k, 0) + v
    return {
        "candidates": written,
        "src_documents": int(len(s_ids)),
        "tgt_documents": int(len(t_ids)),
        "method": p.method.value,
        "site_scope": meta["scope"],
        "sites": len(meta["keys"]),
        "site_shards": len(meta["shards"]),
        **totals,
        "gold": {"note": note, **selection_figures(result, gold)} if gold else {"note": "no gold document pairs"},
    }


# -- executing shards --------------------------------------------------------------------------------------------
def _counts(rows: dict) -> dict[str, int | None]:
    plan = rows.get(("plan", 0))
    n = int(plan["result"]["shards"]) if plan and plan["finished_at"] is not None else None
    return {"plan": 1, "match": n, "write": 1 if n is not None else None}


def current_stage(rows: dict) -> str | None:
    counts = _counts(rows)
    for stage in STAGES:
        if counts[stage] is None or done_count(rows, stage) < counts[stage]:
            return stage
    return None


def site_shard_execute(run_id: int, stage: str, shard_no: int, *, reporter: ProgressReporter | None = None) -> str:
    """Do one shard of a site-restricted run unless it is done or held (as `shards.shard_execute` does for sentence
    runs): the in-process path passes its `reporter` and gets errors raised; a task fails the run on error."""
    from .document_runs import document_run_params

    run = MiningRun.objects.select_related("encoder", "src_corpus", "tgt_corpus").get(pk=run_id)
    if run.status != JobStatus.RUNNING:
        return "skipped"
    state, shard_id = shard_claim(run_id, stage, shard_no, force=reporter is not None)
    if state != "claimed":
        return state
    t0 = time.perf_counter()
    own = (
        None
        if reporter
        else ProgressReporter(MiningRun, run_id, lease_seconds=lease_seconds(), shard=(RunShard, shard_id))
    )
    rep = reporter or own
    try:
        p = document_run_params(run.params)
        folder = run_dir(run_id)
        if stage == "plan":
            result = _stage_plan(run, p, folder)
        elif stage == "match":
            result = _stage_match(run, p, folder, shard_no, lambda: rep.update())
        else:
            result = _stage_write(run, p, folder)
        result["seconds"] = round(time.perf_counter() - t0, 3)
        shard_done(shard_id, result)
    except JobCancelled:
        shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error="cancelled by user", cancelled=True)
        return "cancelled"
    except Exception as exc:
        shard_release(shard_id)
        if reporter is not None:
            raise
        job_mark_failed(job=run, error=f"{stage} shard {shard_no}: {type(exc).__name__}: {exc}")
        logger.exception("run %s: %s shard %s failed", run_id, stage, shard_no)
        return "failed"
    finally:
        if own is not None:
            own.close()
    return "done"


def site_run_inline(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Every stage's shards one after the other in this process; returns the run's stats."""
    while (stage := current_stage(run_rows(run.pk))) is not None:
        rows = run_rows(run.pk)
        n = _counts(rows)[stage] or 0
        reporter.update(stage=f"sites-{stage}", done=done_count(rows, stage), total=n, force=True)
        for k in range(n):
            site_shard_execute(run.pk, stage, k, reporter=reporter)
            reporter.update(done=done_count(run_rows(run.pk), stage))
        record_stage_timing(run.pk, run_rows(run.pk), stage)
    return dict(RunShard.objects.get(run_id=run.pk, stage="write", shard_no=0).result)


def _dispatch(run_id: int, rows: dict, stage: str) -> list[int]:
    n = _counts(rows)[stage] or 0
    now = timezone.now()
    todo = [
        k
        for k in range(n)
        if (r := rows.get((stage, k))) is None
        or (
            r["finished_at"] is None
            and (not r["lease_owner"] or r["lease_expires_at"] is None or r["lease_expires_at"] < now)
        )
    ]
    MiningRun.objects.filter(pk=run_id, status=JobStatus.RUNNING).update(
        stage=f"sites-{stage}", done=done_count(rows, stage), total=n
    )
    for k in todo:
        celery_app.send_task(SITE_SHARD_TASK, args=(run_id, stage, k))
    return todo


def site_shard_task_body(run_id: int, stage: str, shard_no: int) -> dict:
    """What the Celery task does: the shard; then, if its stage is complete, the next stage (one winner), or the
    run's end after the write shard."""
    outcome = site_shard_execute(run_id, stage, shard_no)
    if outcome == "done":
        rows = run_rows(run_id)
        nxt = current_stage(rows)
        if nxt is None:
            run = MiningRun.objects.get(pk=run_id)
            record_stage_timing(run_id, rows, stage)
            job_mark_finished(job=run, stats={**run.stats, **rows[("write", 0)]["result"]})
        elif nxt != stage and MiningRun.objects.filter(
            pk=run_id, status=JobStatus.RUNNING, stage=f"sites-{stage}"
        ).update(stage=f"sites-{nxt}"):
            record_stage_timing(run_id, rows, stage)
            _dispatch(run_id, rows, nxt)
    return {"run_id": run_id, "stage": stage, "shard": shard_no, "outcome": outcome}


def site_run_start(*, run: MiningRun, task_id: str = "") -> dict:
    """Take a pending (or stalled) site-restricted run for the workers and dispatch its first unfinished stage."""
    from .runs import run_mark_started

    if not run_mark_started(run=run, task_id=task_id):
        return {"run_id": run.pk, "status": run.status}
    MiningRun.objects.filter(pk=run.pk).update(stats={**run.stats, "distributed": True}, lease_owner="workers")
    rows = run_rows(run.pk)
    stage = current_stage(rows)
    if stage is None:  # a retried run whose every shard is done: its result is the write shard's
        run.refresh_from_db()
        job_mark_finished(job=run, stats={**run.stats, **rows[("write", 0)]["result"]})
        return {"run_id": run.pk, "status": "succeeded"}
    sent = _dispatch(run.pk, rows, stage)
    return {"run_id": run.pk, "status": "running", "stage": stage, "dispatched": len(sent)}


def site_runs_keep() -> list[tuple[int, str]]:
    """One keeper round: renew the running site runs' leases and re-dispatch the unheld shards of a stage that
    stopped moving for two leases (a holder died, or a message was lost)."""
    lease = lease_seconds()
    now = timezone.now()
    kicked = []
    running = MiningRun.objects.filter(status=JobStatus.RUNNING, kind=RunKind.DOCUMENT, stats__distributed=True)
    for run_id in list(running.values_list("pk", flat=True)):
        MiningRun.objects.filter(pk=run_id).update(lease_expires_at=now + timezone.timedelta(seconds=lease))
        rows = run_rows(run_id)
        times = [t for r in rows.values() for t in (r["started_at"], r["finished_at"]) if t is not None]
        if not times or (now - max(times)).total_seconds() > 2 * lease:
            stage = current_stage(rows)
            if stage is not None and _dispatch(run_id, rows, stage):
                kicked.append((run_id, stage))
    return kicked
