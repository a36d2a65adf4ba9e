"""How long `run_delete` takes for a run with many candidates (never in the test suite).

Fills a scratch database with one corpus of 2 x 1000 sentences and a run with N candidates (distinct pairs, inserted
by SQL with generate_series), then times run_delete and checks nothing of the run is left.

    ./run bench run_delete.py --candidates 1000000
"""

from __future__ import annotations

import argparse
import time

from _django import setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=int, default=1_000_000)
    ap.add_argument("--database", default="pcapp_bench_delete")
    args = ap.parse_args()
    setup(args.database)
    from django.db import connection

    from mining.models import Corpus, Document, MiningRun, RunKind, Sentence, SentencePairCandidate
    from mining.services.runs import run_delete

    side = 1000
    corpus = Corpus.objects.create(name=f"delete-bench-{time.time_ns()}", languages=["en", "fr"])
    ids = {}
    for lang in ("en", "fr"):
        doc = Document.objects.create(corpus=corpus, lang=lang, external_id=lang)
        rows = [Sentence(corpus=corpus, document=doc, lang=lang, position=i, text=f"{lang} {i}", norm_hash=i)
                for i in range(side)]  # fmt: skip
        ids[lang] = [s.pk for s in Sentence.objects.bulk_create(rows)]
    run = MiningRun.objects.create(kind=RunKind.SENTENCE, src_corpus=corpus, tgt_corpus=corpus, status="succeeded")
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {SentencePairCandidate._meta.db_table} "
            "(run_id, src_id, tgt_id, cosine, score, rank, strategy, filter_reason, evidence) "
            "SELECT %s, %s + g / %s, %s + g %% %s, 0.5, 1.0, g + 1, 'max_score', '', "
            '\'{"cosine": 0.5, "src_neighbours": [[1, 0.5], [2, 0.4]], "tgt_neighbours": [[3, 0.5]]}\'::jsonb '
            "FROM generate_series(0, %s - 1) g",
            [run.pk, ids["en"][0], side, ids["fr"][0], side, args.candidates],
        )
    print(f"# inserted {args.candidates:,} candidates in {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    counts = run_delete(run=run)
    seconds = time.perf_counter() - t0
    left = SentencePairCandidate.objects.filter(run_id=run.pk).count()
    print(f"run_delete: {counts['candidates']:,} candidates in {seconds:.2f} s ({left} left)")
    corpus.delete()


if __name__ == "__main__":
    main()
