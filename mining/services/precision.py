"""The precision of a sentence run's kept pairs, estimated from decoy hits (``core.precision``), for the run's stats
(``stats["precision_estimate"]``): the run page, the API and the exports state it with the threshold.

The source side is mined again with the run's encoder, margin, k and strategy against the run's target side plus as
many decoys: sentences in the target language of another corpus (one given, or the one ``selectors.decoy_corpus_for``
picks: the largest other corpus of the database in that language), less those that are near-copies of a target
sentence (``core.precision.PLAN_DISJOINT``); or, when the database holds no other corpus in that language, the target
side's own sentences with their words shuffled (``PLAN_FALLBACK``: a rough figure with a wide interval,
docs/BENCHMARKS.md). The estimate is made at the run's threshold, read through ``selectors.run_threshold_info`` only
(here, in ``_threshold``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
from django.conf import settings
from django.db import transaction

from ..core.candidates import mine_candidates
from ..core.decoys import (
    fill_decoys,
    kind_weights,
    mutated_decoys,
    nearest_similarity,
    sample_decoys,
    shuffled_decoys,
)
from ..core.enums import Rescore
from ..core.evidence_rescore import dictionaries_for, model_from_dict, score_pairs
from ..core.filters import apply_filters
from ..core.knn import knn_both_ways
from ..core.knn.shards import row_shards
from ..core.precision import (
    PLAN_DISJOINT,
    PLAN_FALLBACK,
    DecoyPlan,
    decoy_hits,
    estimate_precision,
    matched_threshold,
)
from ..models import Corpus, JobStatus, MiningRun, RunKind, SentencePairCandidate
from ..selectors import run_threshold_info
from ..selectors.precision import decoy_corpus_for
from .embeddings import Side, embeddings_dir, load_shard, shard_path, side_sentences
from .encoders import encoder_default, load_encoder
from .params import SentenceRunParams
from .rescore import STATS_KEY as RESCORE_KEY

logger = logging.getLogger(__name__)

STATS_KEY = "precision_estimate"
SPREAD_SAMPLE = 5000  # targets whose nearest-neighbour similarity gives the target side's spread (kind_weights)
TASK = "mining.estimate_precision"  # mining.tasks.estimate_precision, sent by name


def _threshold(run: MiningRun) -> tuple[float | None, str]:
    """The run's effective threshold and where it comes from (the one read of it in this module)."""
    info = run_threshold_info(run)
    return info.value, info.source


def _embeddings(run: MiningRun, corpus: Corpus, side: Side, lang: str, site: str, encode) -> np.ndarray:
    """The side's embeddings: the run's cached shards where they still hold these sentences, else encoded now."""
    folder = embeddings_dir(corpus, run.encoder, lang, site)
    parts = []
    for j, (start, stop) in enumerate(row_shards(len(side), int(settings.PCAPP_SHARD_ROWS))):
        emb = load_shard(shard_path(folder, j), side.ids[start:stop])
        if emb is None:
            emb = np.asarray(encode(side.texts[start:stop], lang), dtype=np.float32)
        parts.append(emb)
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)


def _decoy_texts(run: MiningRun, tgt: Side, decoy_corpus: Corpus | None, seed: int) -> tuple[list[str], str, DecoyPlan]:
    """Decoy candidates in draw order (two draws where the plan drops near-copies, else one), their description and
    the plan that makes and counts them."""
    if decoy_corpus is None:
        plan = PLAN_FALLBACK
        draws = 2 if plan.cut is not None else 1
        if plan.kind == "mutated":
            texts = [t for d in range(draws) for t in mutated_decoys(tgt.texts, rate=plan.rate, seed=seed + d)]
            return texts, f"the target side's sentences with {plan.rate:.0%} of their words replaced", plan
        texts = [t for d in range(draws) for t in shuffled_decoys(tgt.texts, seed=seed + d)]
        return texts, "the target side's sentences with their words shuffled", plan
    if decoy_corpus.pk in (run.src_corpus_id, run.tgt_corpus_id):
        raise ValueError(
            f"corpus '{decoy_corpus}' is a side of run {run.pk}: decoys must come from a disjoint collection"
        )
    plan = PLAN_DISJOINT
    pool = side_sentences(decoy_corpus, run.tgt_lang, dedup=True)
    n = len(tgt) * (2 if plan.cut is not None else 1)
    return (
        sample_decoys(pool.texts, n=n, exclude=tgt.texts, seed=seed),
        f"{run.tgt_lang} sentences of corpus '{decoy_corpus}'",
        plan,
    )


def _count_decoys(
    run, params, src, tgt, src_emb, tgt_emb, texts, dec_emb, n_kept
) -> tuple[np.ndarray, np.ndarray, float]:
    """The decoy hits past the pre-filters in the search against real targets + decoys: their scores and which decoy
    each is; and the rank-matched threshold of that search (``core.precision.matched_threshold``). A re-scored run's
    hits are scored by its own stored scorer (``_rescored``), as its candidates were."""
    both = mine_candidates(
        knn_both_ways(src_emb, np.concatenate([tgt_emb, dec_emb]), params.k),
        margin=params.margin,
        k=params.k,
        strategy=params.strategy,
    )
    keep = np.ones(len(both.score), dtype=bool)
    if params.filters and len(both.score):
        all_tgt = tgt.texts + texts
        reasons = apply_filters(
            [src.texts[i] for i in both.src_idx],
            [all_tgt[i] for i in both.tgt_idx],
            src_lang=run.src_lang,
            tgt_lang=run.tgt_lang,
        )
        keep = np.array([r is None for r in reasons], dtype=bool)
    hit = decoy_hits(both.tgt_idx, len(tgt))
    scores = both.score.astype(np.float64)
    if params.rescore is not Rescore.NONE and (run.stats or {}).get(RESCORE_KEY, {}).get("applied"):
        scores = _rescored(run, both, keep, src.texts, tgt.texts + texts)
    on = hit & keep
    return scores[on], both.tgt_idx[on] - len(tgt), matched_threshold(scores[~hit & keep], n_kept)


class RescoreUnavailable(Exception):
    """A re-scored run's scorer cannot be applied here (its message is the run's reason for no estimate)."""


def _rescored(run: MiningRun, both, keep: np.ndarray, src_texts: list[str], tgt_texts: list[str]) -> np.ndarray:
    """(n,) the run's scorer's log-odds of the search's pairs past the pre-filters (-inf elsewhere), from their
    margin, cosine and texts, with the run's length centre and the dictionaries it found."""
    record = run.stats[RESCORE_KEY]
    model = model_from_dict(record["model"])
    rows = np.flatnonzero(keep)
    s_texts = [src_texts[i] for i in both.src_idx[rows]]
    t_texts = [tgt_texts[i] for i in both.tgt_idx[rows]]
    # the dictionaries exactly where the run had them: a worker that has them scores a run made without them alike
    dicts: tuple = (None, None)
    if "dict_src" in model.names:
        dicts = dictionaries_for(run.src_lang, run.tgt_lang, [*s_texts, *t_texts])
    if "dict_src" in model.names and (dicts[0] is None or dicts[1] is None):
        raise RescoreUnavailable(
            "no estimate: the run was re-scored with the FreeDict dictionaries, which this worker does not have, "
            "so its decoy hits cannot be scored as its candidates were"
        )
    out = np.full(len(both.score), -np.inf)
    out[rows] = score_pairs(
        model,
        both.score[rows],
        both.cosine[rows],
        s_texts,
        t_texts,
        length_center=float(record["length_center"]),
        dicts=dicts,
    )
    return out


def _kind_weights(tgt_emb: np.ndarray, dec_nearest: np.ndarray, seed: int) -> np.ndarray:
    """``core.decoys.kind_weights`` of the decoys, the targets' spread read off a seeded sample of them."""
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(tgt_emb), size=min(len(tgt_emb), SPREAD_SAMPLE), replace=False))
    return kind_weights(dec_nearest, nearest_similarity(tgt_emb[pick], tgt_emb, self_index=pick))


def run_precision_estimate(*, run: MiningRun, decoy_corpus: Corpus | None = None, seed: int = 0) -> dict[str, Any]:
    """Estimate the precision of a finished sentence run's kept pairs and store it in ``run.stats[STATS_KEY]``.

    Args:
        run: a succeeded sentence run.
        decoy_corpus: a corpus disjoint from the run's, with sentences in the run's target language; None: the
            corpus ``selectors.decoy_corpus_for`` picks (another corpus of the database with the most sentences in
            that language), or, when there is none, decoys made from the target side (the fallback).
        seed: the decoys' seed.

    Returns:
        What was stored: ``core.precision.PrecisionEstimate.to_dict()`` plus ``threshold_source``,
        ``decoy_source`` ("given", "picked" or "fallback") and ``seconds``; when there is no estimate,
        ``precision`` is None and ``reason`` says why.

    Raises:
        ValueError: the run is not a succeeded sentence run, or the decoy corpus is one of its sides.
    """
    if run.kind != RunKind.SENTENCE:
        raise ValueError(f"run {run.pk} is a {run.kind} run; precision is estimated for sentence runs")
    if run.status != JobStatus.SUCCEEDED:
        raise ValueError(f"run {run.pk} is {run.status}; its precision is estimated once it has succeeded")
    t0 = time.perf_counter()
    params = SentenceRunParams.from_dict(run.params)
    threshold, source = _threshold(run)
    decoy_source = "given"
    if decoy_corpus is None:
        decoy_corpus = decoy_corpus_for(run)
        decoy_source = "fallback" if decoy_corpus is None else "picked"
    if run.encoder is None:
        run.encoder = encoder_default()
    src = side_sentences(run.src_corpus, run.src_lang, site=params.site)
    tgt = side_sentences(run.tgt_corpus, run.tgt_lang, site=params.site)
    texts, described, plan = _decoy_texts(run, tgt, decoy_corpus, seed)
    kept_scores = np.fromiter(
        SentencePairCandidate.objects.filter(run=run, filter_reason="").values_list("score", flat=True), dtype=float
    )
    n_kept = int(np.count_nonzero(kept_scores >= threshold)) if threshold is not None else len(kept_scores)
    dec_scores, at, weights, unscored = np.zeros(0), None, None, ""
    if texts and len(src) and len(tgt):
        encoder = load_encoder(run.encoder)
        src_emb = _embeddings(run, run.src_corpus, src, run.src_lang, params.site, encoder.encode)
        tgt_emb = _embeddings(run, run.tgt_corpus, tgt, run.tgt_lang, params.site, encoder.encode)
        dec_emb = np.asarray(encoder.encode(texts, run.tgt_lang), dtype=np.float16).astype(np.float32)
        nearest = nearest_similarity(dec_emb, tgt_emb) if plan.cut is not None or plan.weighted else None
        if plan.cut is not None:
            chosen = fill_decoys(texts, nearest >= plan.cut, len(tgt))
            texts, dec_emb, nearest = [texts[i] for i in chosen], dec_emb[chosen], nearest[chosen]
            described += f", minus near-copies of target sentences (cosine >= {plan.cut:g})"
        try:
            counted = _count_decoys(run, params, src, tgt, src_emb, tgt_emb, texts, dec_emb, n_kept) if texts else None
        except RescoreUnavailable as exc:
            counted, unscored = None, str(exc)
        if counted is not None:
            dec_scores, which, matched = counted
            at = matched if plan.rank_matched else None
            if plan.weighted:
                weights = _kind_weights(tgt_emb, nearest, seed)[which]
                described += ", weighted to the target side's spread of nearest-neighbour similarity"
    est = estimate_precision(
        kept_scores=kept_scores,
        decoy_scores=dec_scores,
        threshold=threshold,
        n_targets=len(tgt),
        n_decoys=len(texts),
        decoys=described,
        systematic=plan.systematic,
        decoy_threshold=at,
        factor=plan.factor,
        decoy_weights=weights,
    )
    record = {
        **est.to_dict(),
        **({"precision": None, "low": None, "high": None, "reason": unscored} if unscored else {}),
        "threshold_source": source,
        "decoy_source": decoy_source,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    with transaction.atomic():
        locked = MiningRun.objects.select_for_update().get(pk=run.pk)
        locked.stats = {**(locked.stats or {}), STATS_KEY: record}
        locked.save(update_fields=["stats"])
    run.stats = locked.stats
    logger.info("run %s: precision estimate %s", run.pk, record)
    return record


def send_precision_task(run_id: int, decoy_corpus_id: int | None = None) -> None:
    """Ask a worker to estimate a run's precision; a broker that cannot be reached only loses the estimate (logged):
    the run itself has succeeded, and the command `estimate_precision` makes it later."""
    from pcapp.celery import app as celery_app

    try:
        celery_app.send_task(TASK, args=[run_id, decoy_corpus_id])
    except Exception as exc:  # noqa: BLE001 - any broker error: the run stands without its estimate
        logger.warning("run %s: no precision estimate queued (%s: %s)", run_id, type(exc).__name__, exc)


def precision_after_run(run: MiningRun) -> None:
    """Queue the label-free precision estimate of a sentence run that just succeeded (fallback decoys), once the
    current transaction commits; nothing for other kinds or when PCAPP_PRECISION_AFTER_RUN is off."""
    if run.kind != RunKind.SENTENCE or not settings.PCAPP_PRECISION_AFTER_RUN:
        return
    run_id = run.pk
    transaction.on_commit(lambda: send_precision_task(run_id))
