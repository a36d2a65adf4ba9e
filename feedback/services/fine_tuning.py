"""Fine-tuning runs: a DAN encoder learns from reviewers' labels (GOOD pairs as positives, high-scoring BAD pairs as
hard negatives), is compared with the encoder it started from on a held-out evaluation corpus, and becomes
selectable only when it is not worse there (the gate).

The numeric work is in mining.core.encoders.dan_finetune; this module gathers labels, replay and evaluation pairs,
calls it, evaluates both encoders with the evaluation service, and saves.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from django.conf import settings
from django.db import transaction

from annotation.models import Verdict
from annotation.selectors import estimable_labels
from mining.core.calibration.hardneg import review_training_pairs
from mining.core.defaults import DEFAULT_K  # the before and after figures at a sentence run's default k
from mining.models import Artefact, ArtefactKind, Corpus, MiningRun, RunKind
from mining.params import FineTuneParams
from mining.selectors import samples
from mining.services.encoders import load_encoder
from mining.services.evaluation import bucc_from_corpus, gold_pairs_of
from mining.services.progress import ProgressReporter
from mining.services.runs import run_record_timing
from mining.services.training_runs import artefact_create

if TYPE_CHECKING:
    from mining.core.encoders.dan_finetune import FineTuneConfig
    from mining.core.evaluation_report import EvaluationReport

FINE_TUNE_PARAMS = {
    "campaign",
    "eval_corpus",
    "eval_share",
    "eval_gold",
    "eval_min_words",
    "hard_quantile",
    "replay",
    "epochs",
    "lr",
    "emb_lr",
    "validation_share",
    "seed",
}


@dataclass(frozen=True)
class ReviewPairs:
    """Reviewed candidates of a language pair turned into training pairs, and the corpora they came from."""

    positives: list[tuple[str, str]]
    hard_negatives: list[tuple[str, str]]
    n_reviewed: int
    corpus_ids: frozenset[int]


def review_pairs(
    *, src_lang: str, tgt_lang: str, campaign_id: int | None = None, hard_quantile: float = 0.5
) -> ReviewPairs:
    """Every labelled candidate of the src->tgt sentence runs (of one campaign, or all labels), one verdict each by
    majority over its reviewers (ties are left out); GOOD ones are positives, BAD ones scoring at least the
    `hard_quantile` quantile of their own run's scores are hard negatives."""
    qs = estimable_labels().filter(
        sentence_pair__isnull=False,
        sentence_pair__run__src_lang=src_lang,
        sentence_pair__run__tgt_lang=tgt_lang,
        sentence_pair__run__kind=RunKind.SENTENCE,
    )
    if campaign_id is not None:
        qs = qs.filter(campaign_id=campaign_id)
    votes: dict[int, int] = defaultdict(int)
    info: dict[int, tuple] = {}
    for pair_id, run_id, score, verdict, src, tgt, s_corpus, t_corpus in qs.values_list(
        "sentence_pair_id",
        "sentence_pair__run_id",
        "sentence_pair__score",
        "verdict",
        "sentence_pair__src__text",
        "sentence_pair__tgt__text",
        "sentence_pair__src__corpus_id",
        "sentence_pair__tgt__corpus_id",
    ).iterator(chunk_size=20_000):
        votes[pair_id] += 1 if verdict == Verdict.GOOD else -1
        info[pair_id] = (run_id, score, src, tgt, s_corpus, t_corpus)
    decided = [pid for pid, v in votes.items() if v != 0]
    cut = samples.score_quantiles(run_ids={info[pid][0] for pid in decided}, q=hard_quantile)
    positives: list[tuple[str, str]] = []
    hard: list[tuple[str, str]] = []
    by_run: dict[int, list[int]] = defaultdict(list)
    for pid in decided:
        by_run[info[pid][0]].append(pid)
    for run_id, pids in by_run.items():
        labels = np.array([votes[p] > 0 for p in pids])
        scores = np.array([info[p][1] for p in pids], dtype=np.float64)
        pos, neg = review_training_pairs(labels, scores, min_score=cut[run_id])
        positives += [info[pids[i]][2:4] for i in pos]
        hard += [info[pids[i]][2:4] for i in neg]
    corpora = frozenset(c for pid in decided for c in info[pid][4:6])
    return ReviewPairs(positives, hard, len(decided), corpora)


def _figures(report: EvaluationReport) -> dict[str, Any]:
    """P@1 and the best ratio-margin F1 (the margin mining uses by default) of an evaluation, with its setting."""
    best = max((s for s in report.scores if s.margin == "ratio"), key=lambda s: s.f1)
    return {
        "p_at_1": round(report.gold_p_at_1, 4),
        "f1": round(best.f1, 4),
        "precision": round(best.precision, 4),
        "recall": round(best.recall, 4),
        "strategy": best.strategy,
        "threshold": round(best.threshold, 4),
    }


def gate_decision(before: dict[str, Any], after: dict[str, Any], *, changed: bool = True) -> str:
    """'passed' when the new encoder is not worse on P@1 or F1 of the held-out evaluation, 'failed' otherwise;
    'unchanged' when fine-tuning kept the starting weights (nothing new to choose)."""
    if not changed:
        return "unchanged"
    return "passed" if after["p_at_1"] >= before["p_at_1"] and after["f1"] >= before["f1"] else "failed"


def check_fine_tune(*, base: Artefact, src_lang: str, tgt_lang: str, params: dict) -> Corpus:
    """Validate a fine-tuning request; returns the evaluation corpus. Raises ValueError with the reason."""
    unknown = set(params) - FINE_TUNE_PARAMS
    if unknown:
        raise ValueError(f"unknown fine-tuning parameters: {', '.join(sorted(unknown))}")
    if base.kind != ArtefactKind.ENCODER or base.name != "dan" or not base.path:
        raise ValueError(f"{base} is not a trained DAN encoder; only the app's DAN can be fine-tuned")
    if (base.src_lang, base.tgt_lang) != (src_lang, tgt_lang):
        raise ValueError(f"{base} encodes {base.src_lang}-{base.tgt_lang}, not {src_lang}-{tgt_lang}")
    corpus = Corpus.objects.filter(pk=params.get("eval_corpus")).first()
    if corpus is None:
        raise ValueError("a held-out evaluation corpus (params.eval_corpus) with gold sentence pairs is required")
    return corpus


def execute_fine_tune(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Fine-tune run.encoder on the pair's reviews, evaluate old and new on params.eval_corpus, store the new
    encoder as the next 'dan' version, selectable (is_active) only when the gate passes."""
    from mining.core.encoders.dan_finetune import FineTuneConfig, fine_tune_dan
    from mining.core.evaluation_report import evaluate_encoder

    p = FineTuneParams.from_stored(run.params)
    base = run.encoder
    eval_corpus = check_fine_tune(base=base, src_lang=run.src_lang, tgt_lang=run.tgt_lang, params=p.to_dict())
    seed = p.seed
    reporter.update(stage="labels", force=True)
    data = review_pairs(
        src_lang=run.src_lang,
        tgt_lang=run.tgt_lang,
        campaign_id=p.campaign,
        hard_quantile=p.hard_quantile,
    )
    if eval_corpus.pk in data.corpus_ids or eval_corpus.pk == base.trained_on_id:
        raise ValueError(
            f"the evaluation corpus '{eval_corpus}' holds reviewed pairs or {base}'s training pairs; "
            "pick a held-out corpus"
        )
    if len(data.positives) < 2:
        raise ValueError(
            f"{len(data.positives)} GOOD {run.src_lang}-{run.tgt_lang} pairs among {data.n_reviewed} "
            "reviewed; fine-tuning needs at least 2"
        )
    bucc = bucc_from_corpus(
        eval_corpus,
        run.src_lang,
        run.tgt_lang,
        parallel_share=p.eval_share,
        n_gold=p.eval_gold,
        min_words=p.eval_min_words,
        seed=seed,
    )
    if len(bucc.gold) < 2:
        raise ValueError(f"the evaluation corpus '{eval_corpus}' gives {len(bucc.gold)} gold pairs; need at least 2")
    replay = _replay_pairs(base, run.src_lang, run.tgt_lang, p.replay, seed)
    encoder = load_encoder(base)
    config = FineTuneConfig(**p.config_overrides(), seed=seed)
    reporter.update(stage="fine-tune", done=0, force=True)
    t0 = time.perf_counter()
    result = fine_tune_dan(
        encoder, data.positives, data.hard_negatives, replay_pairs=replay, config=config, progress=reporter.progress
    )
    run_record_timing(run=run, stage="fine-tune", seconds=time.perf_counter() - t0)
    reporter.update(stage="evaluate", force=True)
    t0 = time.perf_counter()
    before = _figures(evaluate_encoder(bucc, encoder, run.src_lang, run.tgt_lang, k=DEFAULT_K))
    after = (
        before
        if result.best_epoch == 0
        else _figures(evaluate_encoder(bucc, result.encoder, run.src_lang, run.tgt_lang, k=DEFAULT_K))
    )
    run_record_timing(run=run, stage="evaluate", seconds=time.perf_counter() - t0)
    gate = gate_decision(before, after, changed=result.best_epoch > 0)
    summary = {
        "gate": gate,
        "before": before,
        "after": after,
        "eval_corpus": eval_corpus.pk,
        "eval_gold": len(bucc.gold),
        "best_epoch": result.best_epoch,
        "validation": [round(v, 4) for v in result.validation],
        "positives": result.n_positives,
        "hard_negatives": result.n_hard_negatives,
        "replay": result.n_replay,
        "val_positives": result.n_val_positives,
        "val_hard_negatives": result.n_val_hard_negatives,
        "reviewed": data.n_reviewed,
    }
    stats = {
        "gate": gate,
        "p_at_1_before": before["p_at_1"],
        "p_at_1_after": after["p_at_1"],
        "f1_before": before["f1"],
        "f1_after": after["f1"],
        "positives": result.n_positives,
        "hard_negatives": result.n_hard_negatives,
        "best_epoch": result.best_epoch,
    }
    if gate == "unchanged":
        # The starting weights were kept: nothing new to store or choose.
        return {**stats, "fine_tune": summary}
    folder = Path(settings.PCAPP_DATA_DIR) / "models" / "encoders" / f"run-{run.pk}"
    folder.mkdir(parents=True, exist_ok=True)
    result.encoder.save(folder / "model.pt")
    artefact = fine_tuned_encoder_create(
        run=run, base=base, path=folder / "model.pt", config=config, summary=summary, selectable=gate == "passed"
    )
    return {**stats, "artefact_id": artefact.pk, "version": artefact.version, "fine_tune": summary}


def _replay_pairs(base: Artefact, src_lang: str, tgt_lang: str, n: int, seed: int) -> list[tuple[str, str]]:
    """Up to n gold pairs of the corpus the base encoder was trained on, drawn with the seed."""
    if n <= 0 or base.trained_on is None:
        return []
    pairs = gold_pairs_of(base.trained_on, src_lang, tgt_lang)
    if len(pairs) <= n:
        return pairs
    return [pairs[i] for i in np.sort(np.random.default_rng([seed, 11]).choice(len(pairs), size=n, replace=False))]


@transaction.atomic
def fine_tuned_encoder_create(
    *, run: MiningRun, base: Artefact, path: Path, config: FineTuneConfig, summary: dict, selectable: bool
) -> Artefact:
    """Register a fine-tuned encoder as the next 'dan' version, with both sets of figures; only a gated one is
    active (offered in the run form)."""
    params = {
        **base.params,
        "fine_tuned_from": base.pk,
        "fine_tune_run": run.pk,
        "campaign": run.params.get("campaign"),
        "fine_tune": {k: getattr(config, k) for k in ("epochs", "lr", "emb_lr", "validation_share", "seed")},
    }
    artefact = artefact_create(
        kind=ArtefactKind.ENCODER,
        name="dan",
        path=path,
        run=run,
        params=params,
        metrics={**base.metrics, "fine_tune": summary},
    )
    if not selectable:
        Artefact.objects.filter(pk=artefact.pk).update(is_active=False)
        artefact.is_active = False
    return artefact
