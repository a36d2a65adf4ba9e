"""How long `run_delete` and `corpus_delete` take with many candidates (never in the test suite).

Run case: fills a scratch database with one corpus of 2 x 1000 sentences, a run with N candidates (distinct pairs,
inserted by SQL with generate_series) of which 100 carry a staff label, and a second run of 1000 candidates; then
times run_delete on the big run (until its rows are gone: the call returns after the commit) and checks that nothing
of it is left and that the other run is untouched.

Corpus case (--corpus): a corpus of S sentences (half en, half fr) with one run of C candidates of its own, beside
another corpus whose runs hold O candidates; a "worker" thread keeps writing candidates of a run on the other corpus
(batches of 2,000 rows, each its own transaction, as a write shard does) while corpus_delete runs. Prints the
delete's time and the longest wait of a worker batch during it (the target: the corpus gone in < 30 s, no batch held
up for more than seconds), and checks that the corpus is gone and the other one untouched.

    ./run bench run_delete.py --candidates 1000000
    ./run bench run_delete.py --corpus --sentences 100000 --candidates 1000000 --others 5000000
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
    ap.add_argument("--corpus", action="store_true", help="time corpus_delete instead of run_delete")
    ap.add_argument("--sentences", type=int, default=100_000, help="corpus case: sentences of the deleted corpus")
    ap.add_argument("--others", type=int, default=5_000_000, help="corpus case: candidates of other runs")
    args = ap.parse_args()
    setup(args.database)
    if args.corpus:
        corpus_case(args)
        return
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


def _fill_corpus(name: str, n: int, per_doc: int = 1000) -> tuple[object, dict[str, int]]:
    """A corpus of n sentences (n/2 en, n/2 fr, `per_doc` a document), inserted by SQL; returns it and the first
    sentence id of each language (ids are consecutive per language)."""
    from django.db import connection

    from mining.models import Corpus, Document, Sentence

    corpus = Corpus.objects.create(name=f"{name}-{time.time_ns()}", languages=["en", "fr"])
    side = n // 2
    first = {}
    for lang in ("en", "fr"):
        docs = Document.objects.bulk_create(
            Document(corpus=corpus, lang=lang, external_id=f"{lang}-{d}") for d in range(-(-side // per_doc))
        )
        doc_ids = [d.pk for d in docs]
        with connection.cursor() as cur:
            cur.execute(
                f"INSERT INTO {Sentence._meta.db_table} "
                "(corpus_id, document_id, lang, position, text, norm_hash, detected_lang) "
                "SELECT %s, (%s::bigint[])[g / %s + 1], %s, g %% %s, %s || ' sentence ' || g, g, %s "
                "FROM generate_series(0, %s - 1) g RETURNING id",
                [corpus.pk, doc_ids, per_doc, lang, per_doc, lang, lang, side],
            )
            first[lang] = min(r[0] for r in cur.fetchall())
    return corpus, first


def _fill_run(corpus, first: dict[str, int], side: int, n: int, start_rank: int = 0):
    """A succeeded sentence run on `corpus` with n distinct candidates (src a, tgt (a + b) mod side)."""
    from django.db import connection

    from mining.models import MiningRun, RunKind, SentencePairCandidate

    run = MiningRun.objects.create(kind=RunKind.SENTENCE, src_corpus=corpus, tgt_corpus=corpus, status="succeeded")
    with connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO {SentencePairCandidate._meta.db_table} "
            "(run_id, src_id, tgt_id, cosine, score, rank, strategy, filter_reason, evidence) "
            "SELECT %s, %s + g %% %s, %s + (g %% %s + g / %s) %% %s, 0.5, 1.0, g + 1, 'max_score', '', '{}'::jsonb "
            "FROM generate_series(0, %s - 1) g",
            [run.pk, first["en"], side, first["fr"], side, side, side, n],
        )
    return run


class Worker:
    """A thread that writes candidates of one run in batches, each its own transaction, and times each batch."""

    def __init__(self, run_id: int, first: dict[str, int], side: int, batch: int = 2000) -> None:
        import threading

        from django.db import connection

        self.run_id, self.first, self.side, self.batch = run_id, first, side, batch
        self.params = {k: v for k, v in connection.get_connection_params().items() if k not in ("cursor_factory",)}
        self.waits: list[tuple[float, float]] = []  # (start, seconds)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psycopg

        from mining.models import MiningRun, SentencePairCandidate

        table, runs = SentencePairCandidate._meta.db_table, MiningRun._meta.db_table
        with psycopg.connect(**self.params, autocommit=True) as conn:
            g = 0
            while not self.stop.is_set():
                t0 = time.perf_counter()
                with conn.transaction():
                    conn.execute(
                        f"INSERT INTO {table} (run_id, src_id, tgt_id, cosine, score, rank, strategy, filter_reason, "
                        "evidence) SELECT %s, %s + g %% %s, %s + (g %% %s + g / %s) %% %s, 0.5, 1.0, g + 1, "
                        "'max_score', '', '{}'::jsonb FROM generate_series(%s, %s - 1) g",
                        [self.run_id, self.first["en"], self.side, self.first["fr"], self.side, self.side, self.side,
                         g, g + self.batch],
                    )  # fmt: skip
                    conn.execute(f"UPDATE {runs} SET done = done + %s WHERE id = %s", [self.batch, self.run_id])
                self.waits.append((t0, time.perf_counter() - t0))
                g += self.batch
                time.sleep(0.05)


def corpus_case(args: argparse.Namespace) -> None:
    """Time corpus_delete on a corpus with its own candidates among other runs' candidates, a worker writing."""
    import logging

    from django.db import connection

    from mining.models import Corpus, MiningRun, Sentence, SentencePairCandidate

    logging.basicConfig(level=logging.INFO, format="# %(message)s")
    from mining.services.corpora import corpus_delete

    t0 = time.perf_counter()
    gone, gone_first = _fill_corpus("delete-bench-gone", args.sentences)
    _fill_run(gone, gone_first, args.sentences // 2, args.candidates)
    other_side = 50_000
    kept, kept_first = _fill_corpus("delete-bench-kept", 2 * other_side)
    per_run = 1_000_000
    left = args.others
    while left > 0:
        _fill_run(kept, kept_first, other_side, min(per_run, left))
        left -= per_run
    live = _fill_run(kept, kept_first, other_side, 0)
    with connection.cursor() as cur:
        cur.execute(f"VACUUM ANALYZE {SentencePairCandidate._meta.db_table}")
        cur.execute(f"VACUUM ANALYZE {Sentence._meta.db_table}")
    total = SentencePairCandidate.objects.count()
    print(
        f"# corpus of {args.sentences:,} sentences with {args.candidates:,} candidates, {total:,} candidates in all; "
        f"filled in {time.perf_counter() - t0:.1f} s"
    )
    worker = Worker(live.pk, kept_first, other_side)
    worker.thread.start()
    time.sleep(3)
    print(f"# load average before the delete: {os.getloadavg()}")
    t0 = time.perf_counter()
    removed = corpus_delete(corpus=gone)
    t1 = time.perf_counter()
    time.sleep(2)
    worker.stop.set()
    worker.thread.join()
    during = [s for start, s in worker.waits if t0 <= start <= t1] or [0.0]
    before = [s for start, s in worker.waits if start < t0] or [0.0]
    left_rows = Sentence.objects.filter(corpus_id=gone.pk).count()
    left_rows += MiningRun.objects.filter(src_corpus_id=gone.pk).count()
    kept_rows = SentencePairCandidate.objects.filter(run__src_corpus=kept).exclude(run=live).count()
    print(
        f"corpus_delete: {removed.sentences or args.sentences:,} sentences, {removed.sentence_candidates:,} candidates "
        f"in {t1 - t0:.2f} s ({left_rows} rows left; other corpus {kept_rows:,} of {args.others:,} candidates kept); "
        f"worker batches during it: {len(during)}, longest {max(during):.2f} s, median "
        f"{sorted(during)[len(during) // 2]:.3f} s (before it: longest {max(before):.2f} s); "
        f"load average after: {os.getloadavg()}"
    )
    corpus_delete(corpus=Corpus.objects.get(pk=kept.pk))


if __name__ == "__main__":
    main()
