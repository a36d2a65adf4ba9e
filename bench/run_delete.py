"""How long `run_delete` takes for a run with many candidates (never in the test suite).

Fills a scratch database with one corpus of 2 x 1000 sentences, a run with N candidates (distinct pairs, inserted by
SQL with generate_series) of which 100 carry a staff label, and a second run of 1000 candidates; then times
run_delete on the big run (until its rows are gone: the call returns after the commit) and checks that nothing of it
is left and that the other run is untouched.

    ./run bench run_delete.py --candidates 1000000
"""

from __future__ import annotations

import argparse
import os
import time

from _django import setup

EVIDENCE = '{"cosine": 0.5, "src_neighbours": [[1, 0.5], [2, 0.4]], "tgt_neighbours": [[3, 0.5]]}'


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=int, default=1_000_000)
    ap.add_argument("--labelled", type=int, default=100, help="candidates of the big run that carry a label")
    ap.add_argument("--database", default="pcapp_bench_delete")
    args = ap.parse_args()
    setup(args.database)
    from django.contrib.auth import get_user_model
    from django.db import connection

    from annotation.models import Label, LabelMode
    from mining.models import Corpus, Document, MiningRun, RunKind, Sentence, SentencePairCandidate
    from mining.models.verdict import Verdict
    from mining.services.runs import run_delete

    side = 1000
    corpus = Corpus.objects.create(name=f"delete-bench-{time.time_ns()}", languages=["en", "fr"])
    ids = {}
    for lang in ("en", "fr"):
        doc = Document.objects.create(corpus=corpus, lang=lang, external_id=lang)
        rows = [Sentence(corpus=corpus, document=doc, lang=lang, position=i, text=f"{lang} {i}", norm_hash=i)
                for i in range(side)]  # fmt: skip
        ids[lang] = [s.pk for s in Sentence.objects.bulk_create(rows)]

    def fill(run: MiningRun, n: int) -> None:
        with connection.cursor() as cur:
            cur.execute(
                f"INSERT INTO {SentencePairCandidate._meta.db_table} "
                "(run_id, src_id, tgt_id, cosine, score, rank, strategy, filter_reason, evidence) "
                "SELECT %s, %s + g / %s, %s + g %% %s, 0.5, 1.0, g + 1, 'max_score', '', %s::jsonb "
                "FROM generate_series(0, %s - 1) g",
                [run.pk, ids["en"][0], side, ids["fr"][0], side, EVIDENCE, n],
            )

    def new_run() -> MiningRun:
        return MiningRun.objects.create(kind=RunKind.SENTENCE, src_corpus=corpus, tgt_corpus=corpus, status="succeeded")

    run, other = new_run(), new_run()
    t0 = time.perf_counter()
    fill(run, args.candidates)
    fill(other, side)
    reviewer, _ = get_user_model().objects.get_or_create(username="delete-bench", defaults={"is_staff": True})
    labelled = SentencePairCandidate.objects.filter(run=run).order_by("rank")[: args.labelled]
    Label.objects.bulk_create(
        Label(reviewer=reviewer, sentence_pair=c, verdict=Verdict.GOOD, mode=LabelMode.STAFF) for c in labelled
    )
    with connection.cursor() as cur:
        cur.execute(f"VACUUM ANALYZE {SentencePairCandidate._meta.db_table}")
    print(f"# inserted {args.candidates:,} + {side:,} candidates in {time.perf_counter() - t0:.1f} s")
    print(f"# load average before the delete: {os.getloadavg()}")
    t0 = time.perf_counter()
    counts = run_delete(run=run)
    seconds = time.perf_counter() - t0
    left = SentencePairCandidate.objects.filter(run_id=run.pk).count()
    labels_left = Label.objects.filter(reviewer=reviewer).count()
    kept = SentencePairCandidate.objects.filter(run=other).count()
    print(
        f"run_delete: {counts['candidates']:,} candidates in {seconds:.2f} s "
        f"({left} left, {labels_left} labels left, other run {kept:,} of {side:,} kept)"
    )
    other.delete()
    corpus.delete()
    reviewer.delete()


if __name__ == "__main__":
    main()
