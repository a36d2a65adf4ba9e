"""Draws from a run's sentence-pair candidates, in SQL, for the apps above mining (campaign samplers, fine-tuning).

These read mining's candidate table, so they live here, beside its model: the review and feedback apps call them
instead of naming the table in SQL of their own. Every draw runs in the database (never loading a run's candidates
into Python), and a seeded md5 of the id gives a reproducible random order inside Postgres.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from django.db import connection

from ..models import MiningRun, SentencePairCandidate

CANDIDATES = SentencePairCandidate._meta.db_table


def _ids(sql: str, params: Sequence[object]) -> list[int]:
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return [int(r[0]) for r in cur.fetchall()]


def ids_nearest_score(*, run: MiningRun, score: float, n: int) -> list[int]:
    """The n candidates whose score is nearest `score`, nearest first (ties by id)."""
    return _ids(
        f"SELECT id FROM {CANDIDATES} WHERE run_id = %s ORDER BY abs(score - %s), id LIMIT %s", [run.pk, score, n]
    )


def ids_seeded(*, run: MiningRun, seed: int, n: int) -> list[int]:
    """n candidates drawn uniformly at random, reproducibly for the seed."""
    return _ids(
        f"SELECT id FROM {CANDIDATES} WHERE run_id = %s ORDER BY md5(id::text || %s), id LIMIT %s",
        [run.pk, str(seed), n],
    )


def kept_band_sizes(*, run: MiningRun, threshold: float | None, bands: int) -> tuple[float, float, list[int]] | None:
    """(lo, hi, pairs per band) of the run's kept set (past the pre-filters, score >= threshold; every score when
    None) cut into `bands` equal-width score bands over [lo, hi): its lowest score to just above its highest, as
    ``ids_by_score_band`` cuts them; None when the kept set is empty."""
    cond = "run_id = %s AND filter_reason = ''" + (" AND score >= %s" if threshold is not None else "")
    args = [run.pk] + ([threshold] if threshold is not None else [])
    with connection.cursor() as cur:
        cur.execute(f"SELECT min(score), max(score) FROM {CANDIDATES} WHERE {cond}", args)
        lo, hi = cur.fetchone()
        if lo is None:
            return None
        lo, hi = float(lo), float(hi) + 1e-9
        cur.execute(
            f"SELECT width_bucket(score, %s, %s, %s) - 1 AS band, count(*) FROM {CANDIDATES} WHERE {cond} "
            "GROUP BY band",
            [lo, hi, bands, *args],
        )
        sizes = [0] * bands
        for band, n in cur.fetchall():
            sizes[min(max(int(band), 0), bands - 1)] += int(n)
    return lo, hi, sizes


def ids_by_score_band(
    *,
    run: MiningRun,
    lo: float,
    hi: float,
    bands: int,
    seed: int,
    per_band: int | Sequence[int],
    kept_only: bool = False,
) -> list[tuple[int, int, int]]:
    """(candidate id, band, band size): up to `per_band` seeded draws from each of `bands` equal-width score bands
    over [lo, hi) (one count for every band, or one per band), by band, then draw order. `kept_only`: only pairs that
    passed the pre-filters and score at least `lo` (the kept set, when `lo` is its lowest score)."""
    counts = [int(per_band)] * bands if isinstance(per_band, int) else [int(x) for x in per_band]
    if len(counts) != bands:
        raise ValueError(f"{len(counts)} counts for {bands} bands")
    kept = "AND filter_reason = '' AND score >= %s" if kept_only else ""
    with connection.cursor() as cur:
        cur.execute(
            f"""
            WITH b AS (SELECT id, width_bucket(score, %s, %s, %s) - 1 AS band,
                              row_number() OVER (PARTITION BY width_bucket(score, %s, %s, %s)
                                                 ORDER BY md5(id::text || %s), id) AS k
                       FROM {CANDIDATES} WHERE run_id = %s {kept}),
                 sizes AS (SELECT band, count(*) AS size FROM b GROUP BY band)
            SELECT b.id, b.band, sizes.size FROM b JOIN sizes USING (band)
            WHERE b.k <= (%s::int[])[b.band + 1] ORDER BY b.band, b.k
            """,
            [lo, hi, bands, lo, hi, bands, str(seed), run.pk, *([lo] if kept_only else []), counts],
        )
        return [(int(r[0]), int(r[1]), int(r[2])) for r in cur.fetchall()]


def calibrated_counts(*, run: MiningRun, min_score: float) -> tuple[int, int]:
    """(candidates with a calibrated confidence, those of them scoring at least `min_score`)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT count(*), count(*) FILTER (WHERE score >= %s) FROM {CANDIDATES} "
            "WHERE run_id = %s AND confidence IS NOT NULL",
            [min_score, run.pk],
        )
        n_calibrated, n_kept = cur.fetchone()
        return int(n_calibrated), int(n_kept)


def confidence_at(*, run: MiningRun, position: int) -> float:
    """The calibrated confidence at 0-based `position` in descending order (ties by id)."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT confidence FROM {CANDIDATES} WHERE run_id = %s AND confidence IS NOT NULL "
            "ORDER BY confidence DESC, id OFFSET %s LIMIT 1",
            [run.pk, position],
        )
        row = cur.fetchone()
    if row is None:
        raise IndexError(f"run {run.pk} has fewer than {position + 1} calibrated candidates")
    return float(row[0])


def calibrated_confidences(*, run: MiningRun) -> list[tuple[int, float]]:
    """(candidate id, calibrated confidence) of every calibrated candidate of the run, by id."""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT id, confidence FROM {CANDIDATES} WHERE run_id = %s AND confidence IS NOT NULL ORDER BY id",
            [run.pk],
        )
        return [(int(pk), float(confidence)) for pk, confidence in cur.fetchall()]


def ids_nearest_confidence(
    *, run: MiningRun, confidence: float, seed: int, n: int, exclude: Collection[int]
) -> list[int]:
    """The n calibrated candidates whose confidence is nearest `confidence`, nearest first (seeded ties), leaving out
    `exclude`."""
    return _ids(
        f"SELECT id FROM {CANDIDATES} WHERE run_id = %s AND confidence IS NOT NULL "
        "AND NOT (id = ANY(%s::bigint[])) ORDER BY abs(confidence - %s), md5(id::text || %s), id LIMIT %s",
        [run.pk, list(exclude), confidence, str(seed), n],
    )


def score_quantiles(*, run_ids: Collection[int], q: float) -> dict[int, float]:
    """The q-quantile of each run's candidate scores (runs without candidates are left out)."""
    if not run_ids:
        return {}
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT run_id, percentile_cont(%s) WITHIN GROUP (ORDER BY score) FROM {CANDIDATES} "
            "WHERE run_id = ANY(%s) GROUP BY run_id",
            [q, list(run_ids)],
        )
        return {int(run_id): float(value) for run_id, value in cur.fetchall()}
