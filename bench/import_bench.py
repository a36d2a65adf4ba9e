"""Import throughput: a generated corpus of N sentence pairs (TSV) through the same service as the app.

    ./run bench import_bench.py                 # 200,000 then 1,000,000 pairs
    ./run bench import_bench.py --sizes 50000   # a quick look

Prints pairs/s, rows/s (sentences + gold pairs) and the peak resident memory of the importing process and its
language-id workers, per size, so you can see that memory does not grow with the file. Target: >= 20,000 pairs/s.
The text is generated from the vocabulary of Django's real en/fr catalogues, seeded, with random sentence lengths
(5-25 words): no two lines are copies, so nothing is helped by caching.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
from _django import setup


def vocabulary(lang: str) -> list[str]:
    import django
    import polib

    path = Path(django.__file__).parent / "conf" / "locale" / "fr" / "LC_MESSAGES" / "django.po"
    words: set[str] = set()
    for entry in polib.pofile(str(path)):
        words.update(re.findall(r"\w+", entry.msgid if lang == "en" else entry.msgstr))
    return sorted(w for w in words if not w.isdigit())


def generate(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    en, fr = np.array(vocabulary("en")), np.array(vocabulary("fr"))
    with path.open("w", encoding="utf-8") as out:
        block = 10_000
        for start in range(0, n, block):
            m = min(block, n - start)
            lengths = rng.integers(5, 26, size=m)
            for i, length in enumerate(lengths):
                a = " ".join(en[rng.integers(0, len(en), size=length)])
                b = " ".join(fr[rng.integers(0, len(fr), size=length + int(rng.integers(-2, 3)))])
                out.write(f"{a.capitalize()} {start + i}.\t{b.capitalize()} {start + i}.\n")


class PeakMemory:
    """Samples the RSS of this process plus its children every 50 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self.peak_own = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            try:
                own = me.memory_info().rss
                rss = own + sum(c.memory_info().rss for c in me.children(recursive=True))
            except psutil.Error:
                own = rss = 0
            self.peak = max(self.peak, rss)
            self.peak_own = max(self.peak_own, own)
            time.sleep(0.05)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def clear(name: str) -> None:
    """Delete the bench corpus and vacuum its tables, so a run does not pay for the dead rows of earlier runs (the CI
    server runs with autovacuum off; millions of dead rows in the indexes slowed later imports and deletes)."""
    from django.db import connection

    from mining.models import Corpus

    Corpus.objects.filter(name=name).delete()
    with connection.cursor() as cur:
        cur.execute(
            "VACUUM ANALYZE mining_corpus, mining_document, mining_sentence, mining_goldsentencepair, "
            "mining_golddocumentpair"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="200000,1000000")
    parser.add_argument("--workers", type=int, default=1, help="language-id processes beside the importer")
    parser.add_argument("--no-header", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    if len(sizes) > 1:
        # One fresh process per size, so a size's peak memory does not include what an earlier import left behind.
        print(
            f"{'pairs':>10} {'file MB':>8} {'seconds':>8} {'pairs/s':>9} {'rows/s':>9} {'peak RSS MB':>12} "
            f"{'of which importer':>18}",
            flush=True,
        )
        for n in sizes:
            subprocess.run(
                [sys.executable, __file__, "--sizes", str(n), "--workers", str(args.workers), "--no-header"], check=True
            )
        return
    # A scratch database per configured database (pcapp -> pcapp_bench), so people on one server do not share one.
    setup(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1] + "_bench")
    from mining.services.imports import import_execute, import_job_create

    if not args.no_header:
        print(
            f"{'pairs':>10} {'file MB':>8} {'seconds':>8} {'pairs/s':>9} {'rows/s':>9} {'peak RSS MB':>12} "
            f"{'of which importer':>18}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = Path(tmp) / f"bench-{n}.tsv"
            generate(path, n)
            clear(f"bench-{n}")
            job = import_job_create(
                corpus_name=f"bench-{n}",
                fmt="tsv",
                paths=[str(path)],
                options={"src_lang": "en", "tgt_lang": "fr", "header": False, "langid_workers": args.workers},
            )
            load_before = os.getloadavg()[0]
            with PeakMemory() as mem:
                t0 = time.perf_counter()
                job = import_execute(job=job)
                seconds = time.perf_counter() - t0
            if job.status != "succeeded":
                raise SystemExit(f"import failed: {job.error}")
            rows = job.stats["sentences"] + job.stats["gold_sentence_pairs"]
            print(
                f"{n:>10} {path.stat().st_size / 1e6:>8.1f} {seconds:>8.1f} {n / seconds:>9,.0f} "
                f"{rows / seconds:>9,.0f} {mem.peak / 1e6:>12,.0f} {mem.peak_own / 1e6:>18,.0f}  "
                f"(load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after)",
                flush=True,
            )
            clear(f"bench-{n}")


if __name__ == "__main__":
    main()
