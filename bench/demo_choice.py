"""Which demo shows the mining loop best, measured: an en-fr run on the demo corpus (`load_demo`, whole or keeping a
share of each language's translations, `--keep-share`) with the default parameters but the margin and k, scored
against the gold pairs.

    ./run bench demo_choice.py                        # the configurations below
    ./run bench demo_choice.py --configs 1:distance:4 --evaluate

Per configuration (share:margin:k): the corpus's en and fr sentences and en-fr gold pairs; the run's candidates and
those no pre-filter rejected, and how many of those are gold pairs; the label-free default threshold; what it keeps,
how many of them are gold pairs (true precision) against the precision the run page prints (estimated), and the share
of the correct candidates it keeps. `--evaluate` also runs the README's `evaluate_mining` example on the whole
corpus. It works in a scratch database (<DATABASE_URL's name>_demo_choice), one corpus per share.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._django import setup  # noqa: E402

CONFIGS = "1:ratio:4,1:distance:4,1:ratio:16,1:distance:16,0.5:ratio:4,0.5:distance:4"
"""share of translations kept : margin : k; the first is the default run on the whole corpus."""


def measure(share: float, margin: str, k: int) -> dict:
    from django.core.management import call_command

    from mining.models import Corpus, GoldSentencePair, MiningRun, SentencePairCandidate
    from mining.selectors import run_threshold_info

    name = f"demo-share-{share:g}"
    if not Corpus.objects.filter(name=name).exists():
        call_command("load_demo", "--keep-share", str(share), "--name", name, stdout=io.StringIO())
    started = time.perf_counter()
    run_name = f"{name} {margin} k={k}"
    options = ["--margin", margin, "--k", str(k), "--name", run_name]
    call_command("mine", name, "--src", "en", "--tgt", "fr", *options, stdout=io.StringIO())
    seconds = time.perf_counter() - started
    run = MiningRun.objects.filter(name=run_name).latest("pk")
    gold = set(
        GoldSentencePair.objects.filter(
            corpus=run.src_corpus, src__document__lang="en", tgt__document__lang="fr"
        ).values_list("src_id", "tgt_id")
    )
    rows = list(SentencePairCandidate.objects.filter(run=run).values_list("src_id", "tgt_id", "score", "filter_reason"))
    unfiltered = [r for r in rows if not r[3]]
    info = run_threshold_info(run)
    kept = [r for r in unfiltered if info.value is None or r[2] >= info.value]
    correct = sum((r[0], r[1]) in gold for r in unfiltered)
    correct_kept = sum((r[0], r[1]) in gold for r in kept)
    return {
        "config": f"{share:g}:{margin}:{k}",
        "src": run.stats.get("src_sentences"),
        "tgt": run.stats.get("tgt_sentences"),
        "gold": len(gold),
        "candidates": len(rows),
        "unfiltered": len(unfiltered),
        "correct": correct,
        "threshold": info.value,
        "kept": len(kept),
        "correct_kept": correct_kept,
        "true_precision": correct_kept / len(kept) if kept else None,
        "estimated_precision": (info.detail or {}).get("estimated_precision"),
        "recall_of_correct": correct_kept / correct if correct else None,
        "seconds": seconds,
        "corpus": name,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=CONFIGS, help="share:margin:k,... (default: %(default)s)")
    parser.add_argument("--evaluate", action="store_true", help="run the README's evaluate_mining example too")
    args = parser.parse_args()
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/pcapp").rsplit("/", 1)[1]
    setup(base + "_demo_choice")
    from django.core.management import call_command

    from mining.models import Corpus

    Corpus.objects.filter(name__startswith="demo-share-").delete()
    print(f"# {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f} at start")
    head = ["config", "en/fr", "gold", "cands", "unfilt.", "correct", "threshold", "kept", "ok kept", "true P"]
    print("  ".join(head + ["est. P", "kept/correct", "s"]))
    for config in args.configs.split(","):
        share, margin, k = config.split(":")
        r = measure(float(share), margin, int(k))
        cells = [
            f"{r['config']:<16}",
            f"{r['src']}/{r['tgt']}",
            r["gold"],
            r["candidates"],
            r["unfiltered"],
            r["correct"],
            f"{r['threshold'] or 0:.4f}",
            r["kept"],
            r["correct_kept"],
            f"{r['true_precision'] or 0:.3f}",
            f"{r['estimated_precision'] or 0:.3f}",
            f"{r['recall_of_correct'] or 0:.3f}",
            f"{r['seconds']:.0f}",
        ]
        print("  ".join(str(c) for c in cells), flush=True)
    print(f"# load {os.getloadavg()[0]:.1f} at end")
    if args.evaluate:
        if not Corpus.objects.filter(name="demo-share-1").exists():
            call_command("load_demo", "--keep-share", "1", "--name", "demo-share-1", stdout=io.StringIO())
        corpus = "demo-share-1"
        print(f"\n$ ./run manage evaluate_mining {corpus} --src en --tgt fr --k 4,16 --share 1 --min-words 2")
        call_command("evaluate_mining", corpus, "--src", "en", "--tgt", "fr", "--k", "4,16", "--share", "1",
                     "--min-words", "2")  # fmt: skip


if __name__ == "__main__":
    main()
