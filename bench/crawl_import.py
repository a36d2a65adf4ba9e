"""Crawl import: pages/s per core, the two extractors compared, and peak memory against the size of the WARC.

    ./run bench crawl_import.py                          # extractors + ingest on var/bench/crawl (built if missing)
    ./run bench crawl_import.py --memory 100,500,2000    # + peak memory on plain WARC files of these sizes (MB)
    ./run bench crawl_import.py --only memory --memory 100,2000

The crawl is scripts/build_crawl.py's (Debian's HTML manuals in five languages as nine synthetic sites). Rows:

- extractors: the reading step alone (FastWARC records, charset, main text, language id, sentence split), in this
  process, CPU seconds, on the same first --sample pages with resiliparse and with trafilatura (and resiliparse on
  every page);
- ingest: the whole import through the app's service (`import_execute`) into a scratch database (`<db>_bench`):
  wall seconds, and pages per CPU second summed over the importing process, its language-id helpers and the
  Postgres backend that COPYs (read from /proc), i.e. pages/s per core;
- memory: a file's streaming phase (read, extract, spool to disk: what an import part does before it writes) on
  plain WARC files of about each --memory size (the crawl repeated, each copy's text marked so nothing is a
  duplicate), each in a fresh process: peak resident memory (VmHWM) and pages/s.

Every line names the load average before and after; the CPU is what `lscpu` says.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRAWL = ROOT / "var" / "bench" / "crawl"


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def ensure_crawl(folder: Path, *, copies: int = 1, plain: bool = False) -> None:
    if not (folder / "gold.jsonl").exists():
        args = [sys.executable, str(ROOT / "scripts" / "build_crawl.py"), str(folder), "--copies", str(copies)]
        subprocess.run(args + (["--plain", "--files", "1"] if plain else []), check=True)


def read_rate(folder: Path, extractor: str, limit: int | None) -> tuple[int, float]:
    """(pages, CPU seconds) of reading the crawl's files with `extractor`, stopping after `limit` pages."""
    from mining.ingest.crawl import CrawlOptions, CrawlPage, Extractor, PageBuilder, read_crawl

    builder = PageBuilder(CrawlOptions(extractor=Extractor(extractor)))
    read_crawl_warmup(folder)
    n = 0
    t0 = time.process_time()
    for path in sorted(folder.glob("crawl-*.warc*")):
        for event in read_crawl(str(path), builder.options, builder):
            n += isinstance(event, CrawlPage)
            if limit and n >= limit:
                return n, time.process_time() - t0
    return n, time.process_time() - t0


def read_crawl_warmup(folder: Path) -> None:
    """Load the language-id model before timing (a one-off second per process)."""
    from mining.ingest.text import detect_languages

    detect_languages(["warm up"])


def extractors(folder: Path, sample: int) -> None:
    print(f"-- extractors (reading step, this process, {_load()})")
    for name, limit in (("resiliparse", sample), ("trafilatura", sample), ("resiliparse", None)):
        pages, cpu = read_rate(folder, name, limit)
        print(f"{name:12} {pages:6d} pages {cpu:7.1f} CPU s {pages / cpu:8.1f} pages/s  ({_load()})", flush=True)


def _cpu(pid: int) -> float:
    import psutil

    try:
        t = psutil.Process(pid).cpu_times()
        return t.user + t.system
    except psutil.Error:
        return 0.0


def _drop_bench_corpus() -> None:
    """Remove the scratch corpus: its rows in bulk first (Django's cascade would load every sentence)."""
    from django.db import connection, transaction

    from mining.models import Corpus, Document, GoldDocumentPair, GoldSentencePair, Sentence

    for corpus in Corpus.objects.filter(name="crawl-bench"):
        with transaction.atomic(), connection.cursor() as cur:
            for model in (GoldSentencePair, GoldDocumentPair, Sentence, Document):
                cur.execute(f'DELETE FROM "{model._meta.db_table}" WHERE corpus_id = %s', [corpus.pk])
            corpus.delete()


def ingest(folder: Path, profile: Path | None = None, repeat: int = 1) -> None:
    """The whole import through the service into the scratch database, `repeat` times (the machine is shared: the
    least CPU of the repeats is the one least disturbed). Under cProfile, written to `profile`, when given: then the
    CPU figures include the profiler's overhead. The language-id model is loaded before the timing (a one-off second
    per worker process)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from _django import setup

    setup(os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1] + "_bench")
    import psutil
    from django.db import connection

    from mining.services.imports import import_execute, import_job_create

    read_crawl_warmup(folder)
    _drop_bench_corpus()
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        backend = cur.fetchone()[0]
    paths = [str(p) for p in sorted(folder.glob("crawl-*.warc*"))]
    size = sum(Path(p).stat().st_size for p in paths) / 1e6
    rates = []
    for _ in range(repeat):
        job = import_job_create(corpus_name="crawl-bench", fmt="warc", paths=paths, options={"langid_workers": 0})
        me = psutil.Process()
        load0 = _load()
        cpu0, pg0 = sum(me.cpu_times()[:4]), _cpu(backend)
        t0 = time.perf_counter()
        if profile is not None:
            import cProfile

            with cProfile.Profile() as prof:
                job = import_execute(job=job)
            prof.dump_stats(str(profile))
        else:
            job = import_execute(job=job)
        wall = time.perf_counter() - t0
        cpu, pg = sum(me.cpu_times()[:4]) - cpu0, _cpu(backend) - pg0
        if job.status != "succeeded":
            raise SystemExit(f"import failed: {job.error}")
        s = job.stats
        print(f"-- ingest ({len(paths)} files, {size:.1f} MB, {s['records']} records)")
        print(
            f"{s['documents']} pages ({s['sentences']} sentences) in {wall:.1f} s wall: importer {cpu:.1f} CPU s + "
            f"Postgres backend {pg:.1f} CPU s = {s['documents'] / (cpu + pg):.0f} pages/s per core "
            f"(importer alone {s['documents'] / cpu:.0f}); {load0} before, {_load()} after",
            flush=True,
        )
        print("skipped: " + json.dumps(s["skipped"], sort_keys=True))
        rates.append(s["documents"] / (cpu + pg))
        _drop_bench_corpus()
    if repeat > 1:
        print(f"best of {repeat}: {max(rates):.0f} pages/s per core (median {sorted(rates)[len(rates) // 2]:.0f})")


def stream_phase(path: Path) -> None:
    """One import part's streaming phase on `path` (read, extract, spool); prints pages, seconds and peak RSS."""
    sys.path.insert(0, str(ROOT / "bench"))
    from _proc import reset_peak, status_kb

    from mining.ingest.crawl import CrawlOptions, CrawlPage, read_crawl

    read_crawl_warmup(path.parent)
    reset_peak()
    base = status_kb("VmRSS")
    n = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    with tempfile.TemporaryFile() as spool:
        for event in read_crawl(str(path), CrawlOptions()):
            if isinstance(event, CrawlPage):
                pickle.dump(event, spool, protocol=pickle.HIGHEST_PROTOCOL)
                n += 1
    cpu = time.process_time() - c0
    print(
        f"{path.stat().st_size / 1e6:9.0f} MB {n:8d} pages {time.perf_counter() - t0:8.0f} s "
        f"{n / cpu:7.0f} pages/CPU s "
        f"peak RSS {status_kb('VmHWM') / 1024:6.0f} MB (at start {base / 1024:.0f} MB)  ({_load()})",
        flush=True,
    )


def memory(sizes: list[int]) -> None:
    print(f"-- memory: an import part's streaming phase, fresh process per size ({_load()})")
    one = 71  # MB of plain WARC per copy of the crawl (measured: 142 MB for two copies)
    for mb in sizes:
        copies = max(1, round(mb / one))
        folder = ROOT / "var" / "bench" / f"crawl-plain-x{copies}"
        ensure_crawl(folder, copies=copies, plain=True)
        path = next(folder.glob("crawl-*.warc"))
        subprocess.run([sys.executable, __file__, "--stream", str(path)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--crawl", type=Path, default=CRAWL)
    parser.add_argument("--sample", type=int, default=400, help="pages read by both extractors")
    parser.add_argument("--memory", default="", help="sizes in MB of plain WARC files for the memory rows")
    parser.add_argument("--only", choices=["extractors", "ingest", "memory"])
    parser.add_argument("--profile", type=Path, help="ingest under cProfile, its stats written to this file")
    parser.add_argument("--repeat", type=int, default=1, help="imports timed one after the other (ingest)")
    parser.add_argument("--section", help=argparse.SUPPRESS)
    parser.add_argument("--stream", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")
    if args.section == "ingest":  # its own process: it points Django at the scratch database before setting up
        ingest(args.crawl, args.profile, args.repeat)
        return
    import django

    django.setup()
    if args.stream:
        stream_phase(args.stream)
        return
    ensure_crawl(args.crawl)
    print(f"crawl_import: {args.crawl} ({_load()})", flush=True)
    if args.only in (None, "extractors"):
        extractors(args.crawl, args.sample)
    if args.only in (None, "ingest"):
        extra = ["--repeat", str(args.repeat)] + (["--profile", str(args.profile)] if args.profile else [])
        section = [sys.executable, __file__, "--section", "ingest", "--crawl", str(args.crawl)]
        subprocess.run(section + extra, check=True)
    if args.memory and args.only in (None, "memory"):
        memory([int(x) for x in args.memory.split(",")])


if __name__ == "__main__":
    main()
