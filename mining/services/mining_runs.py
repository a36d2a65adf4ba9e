"""The sentence-mining run: embed both sides, kNN both ways, margin scoring, candidate selection, pre-filters,
and a binary COPY of the candidates with their evidence.

Stages (each timed in run.timings): embed-src, embed-tgt (sharded, resumable), knn, score, filter, write.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from django.db import transaction

from ..core.candidates import mine_candidates
from ..core.filters import FilterReason, apply_filters, check_language
from ..core.knn import KnnMethod, knn_both
from ..core.types import Candidates, Direction
from ..db.bulk import copy_rows
from ..ingest.langid import detect_with_probability
from ..models import MiningRun, SentencePairCandidate
from .default_threshold import default_threshold_for_run
from .embeddings import Side, embed_side, side_sentences
from .encoders import encoder_default, load_encoder
from .params import SentenceRunParams
from .progress import ProgressReporter
from .runs import run_record_timing

logger = logging.getLogger(__name__)


@contextmanager
def _stage(run: MiningRun, reporter: ProgressReporter, name: str, total: int = 0) -> Iterator[None]:
    reporter.update(stage=name, done=0, total=total, force=True)
    t0 = time.perf_counter()
    yield
    run_record_timing(run=run, stage=name, seconds=time.perf_counter() - t0)


def execute_sentence_run(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Mine sentence pairs between run.src_lang of run.src_corpus and run.tgt_lang of run.tgt_corpus."""
    params = SentenceRunParams.from_dict(run.params)
    if run.encoder is None:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
        run.refresh_from_db()
    encoder = load_encoder(run.encoder)
    src = side_sentences(run.src_corpus, run.src_lang)
    tgt = side_sentences(run.tgt_corpus, run.tgt_lang)
    src_ids, src_texts, tgt_ids, tgt_texts = src.ids, src.texts, tgt.ids, tgt.texts
    if len(src_ids) == 0 or len(tgt_ids) == 0:
        raise ValueError(
            f"nothing to mine: {len(src_ids)} '{run.src_lang}' sentences in {run.src_corpus}, "
            f"{len(tgt_ids)} '{run.tgt_lang}' sentences in {run.tgt_corpus}"
        )
    with _stage(run, reporter, "embed-src", len(src_ids)):
        src_emb = embed_side(
            corpus=run.src_corpus,
            lang=run.src_lang,
            encoder_artefact=run.encoder,
            encode=encoder.encode,
            ids=src_ids,
            texts=src_texts,
            progress=reporter.progress,
        )
    with _stage(run, reporter, "embed-tgt", len(tgt_ids)):
        tgt_emb = embed_side(
            corpus=run.tgt_corpus,
            lang=run.tgt_lang,
            encoder_artefact=run.encoder,
            encode=encoder.encode,
            ids=tgt_ids,
            texts=tgt_texts,
            progress=reporter.progress,
        )
    with _stage(run, reporter, "knn", len(src_ids)):
        extra = {"nprobe": params.nprobe} if params.knn is KnnMethod.IVF else {}
        knn = knn_both(src_emb, tgt_emb, params.k, method=params.knn, **extra)
    with _stage(run, reporter, "score"):
        cands = mine_candidates(
            knn,
            margin=params.margin,
            k=params.k,
            strategy=params.strategy,
            threshold=params.threshold,
        )
    with _stage(run, reporter, "filter", len(cands)):
        reasons, language = _filter_reasons(cands, src, tgt, run, params)
    stats: dict = {}
    if params.threshold is None:
        # No threshold asked for: estimate one from the run's own scores until a calibrated one replaces it.
        stats["default_threshold"] = default_threshold_for_run(
            cands=cands, reasons=reasons, margin=params.margin.value, k=params.k
        )
    with _stage(run, reporter, "write", len(cands)):
        written = write_sentence_candidates(
            run=run,
            cands=cands,
            reasons=reasons,
            language=language,
            knn=knn,
            src_ids=src_ids,
            tgt_ids=tgt_ids,
            strategy=params.strategy.value,
        )
    kept = int(sum(1 for r in reasons if not r))
    return {
        **stats,
        "candidates": written,
        "kept_after_filters": kept,
        "src_sentences": int(len(src_ids)),
        "tgt_sentences": int(len(tgt_ids)),
    }


def _filter_reasons(
    cands: Candidates, src: Side, tgt: Side, run: MiningRun, params: SentenceRunParams
) -> tuple[list[str], list[dict | None]]:
    """The name of the first pre-filter rule that fired for each candidate ('' when none), and the language
    evidence of each (the side whose detected language differs, that language and the identifier's probability;
    None when both sides are in their expected language). A wrong-language rejection needs a confident identifier
    and enough text to judge."""
    if not params.filters or len(cands) == 0:
        return [""] * len(cands), [None] * len(cands)
    src_texts = [src.texts[i] for i in cands.src_idx]
    tgt_texts = [tgt.texts[i] for i in cands.tgt_idx]
    src_detected = [src.detected[i] or None for i in cands.src_idx]
    tgt_detected = [tgt.detected[i] or None for i in cands.tgt_idx]
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
    return reasons, [check.evidence(i) for i in range(len(cands))]


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


@transaction.atomic
def write_sentence_candidates(
    *,
    run: MiningRun,
    cands: Candidates,
    reasons: list[str],
    language: list[dict | None] | None = None,
    knn,
    src_ids: np.ndarray,
    tgt_ids: np.ndarray,
    strategy: str,
) -> int:
    """Replace the run's candidates with `cands` in one binary COPY; rank 1 = best score."""
    SentencePairCandidate.objects.filter(run=run).delete()
    k = knn.k
    s_db = src_ids[cands.src_idx]
    t_db = tgt_ids[cands.tgt_idx]
    fwd_ids, fwd_sims = knn.fwd_ids[cands.src_idx, :k], knn.fwd_sims[cands.src_idx, :k]
    bwd_ids, bwd_sims = knn.bwd_ids[cands.tgt_idx, :k], knn.bwd_sims[cands.tgt_idx, :k]

    def rows() -> Iterator[tuple]:
        for i in range(len(cands)):
            evidence = {
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
            if language is not None and language[i] is not None:
                evidence["language"] = language[i]
            yield (
                run.pk,
                int(s_db[i]),
                int(t_db[i]),
                float(cands.cosine[i]),
                float(cands.score[i]),
                i + 1,
                strategy,
                reasons[i],
                evidence,
            )

    return copy_rows(
        SentencePairCandidate,
        ["run_id", "src_id", "tgt_id", "cosine", "score", "rank", "strategy", "filter_reason", "evidence"],
        rows(),
        ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "jsonb"],
    )
