"""Sentence alignment quality for bench/document_quality.py: the aligner's beads against the gold block ladders of
the pages that line up block by block (see that script's docstring)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from _docdata import COLLECTION, block_ladder, datasets, load_split

from mining.core.align import AlignConfig, align, score_alignment
from scripts.data_sources import UNALIGNED_PAGES, load_documents

Encode = Callable[[list[str], str], np.ndarray]


def project(pred: list[tuple[range, range]], gold: list[tuple[range, range]]) -> list[tuple[range, range]]:
    """Merge consecutive predicted beads until both sides end where the same gold bead (block) ends."""
    ends = {(g[0].stop, g[1].stop) for g in gold}
    out, s0, t0 = [], None, None
    for s, t in pred:
        s0 = s.start if s0 is None else s0
        t0 = t.start if t0 is None else t0
        if (s.stop, t.stop) in ends:
            out.append((range(s0, s.stop), range(t0, t.stop)))
            s0 = t0 = None
    return out


ALIGN_SETS = ("gimp-help", "debian-reference", "manpages")


def alignment_pages(collection: str, lang: str, args) -> list[tuple[list[str], list[str], list[tuple[range, range]]]]:
    """Gold-laddered page pairs: the GIMP manual's test half (its training half tuned the aligner's costs), and every
    page pair of the other collections, whose blocks line up (same count, stored sentences = the blocks' splits)."""
    if collection == COLLECTION:
        en, xx, _, ids = load_split(lang, args.seed, args.limit)
    else:
        en = {d["id"]: d for d in load_documents(datasets(), collection, "en")}
        xx = {d["id"]: d for d in load_documents(datasets(), collection, lang)}
        ids = sorted(set(en) & set(xx))
    ids = [i for i in ids if i not in UNALIGNED_PAGES and len(en[i]["blocks"]) == len(xx[i]["blocks"])]
    return [lad for lad in (block_ladder(en[i], xx[i], lang) for i in ids) if lad is not None]


def drop_blocks(
    gold: list[tuple[range, range]], rng: np.random.Generator, share: float
) -> tuple[np.ndarray, np.ndarray, list[tuple[range, range]]]:
    """Remove each block from one side with probability `share` (half from the English side, half from the
    translation: untranslated or extra paragraphs). Returns the kept rows of each side and the re-indexed ladder, in
    which a removed block leaves a 1:0 or 0:1 bead (not scored, but a bead that crosses it merges blocks)."""
    n_s, n_t = gold[-1][0].stop if gold else 0, gold[-1][1].stop if gold else 0
    keep_s, keep_t = np.ones(n_s, bool), np.ones(n_t, bool)
    u = rng.uniform(size=len(gold))
    out, i, j = [], 0, 0
    for (s_rows, t_rows), x in zip(gold, u, strict=True):
        if x < share / 2:
            keep_s[s_rows.start : s_rows.stop] = False
            s_rows = range(s_rows.start, s_rows.start)
        elif x < share:
            keep_t[t_rows.start : t_rows.stop] = False
            t_rows = range(t_rows.start, t_rows.start)
        out.append((range(i, i + len(s_rows)), range(j, j + len(t_rows))))
        i, j = i + len(s_rows), j + len(t_rows)
    return keep_s, keep_t, out


def alignment(lang: str, args, encode: Encode, config: AlignConfig) -> dict:
    """Strict/lax P/R/F1 of the aligner on each collection's gold ladders, beside a lengths-only baseline (the same
    DP with every cosine 1: Gale-Church plus the bead costs)."""
    out = {}
    for collection in ALIGN_SETS:
        pages = alignment_pages(collection, lang, args)
        if not pages:
            continue
        kinds = ("raw", "blocks", "lengths", "dropped", "dropped lengths")
        counts = {k: [0, 0, 0, 0, 0] for k in kinds}
        n_gold, n_sents, t_align = 0, 0, 0.0
        rng = np.random.default_rng(args.seed)
        for s_sents, t_sents, gold in pages:
            n_gold += len(gold)
            n_sents += len(s_sents)
            s_emb, t_emb = encode(s_sents, "en"), encode(t_sents, lang)
            s_len, t_len = np.array([len(s) for s in s_sents]), np.array([len(t) for t in t_sents])
            t0 = time.perf_counter()
            beads = align(s_emb, t_emb, s_len, t_len, config)
            t_align += time.perf_counter() - t0
            keep_s, keep_t, gold_d = drop_blocks(gold, rng, args.drop)
            runs = (
                ("blocks", s_emb, t_emb, s_len, t_len, gold, beads),
                ("dropped", s_emb[keep_s], t_emb[keep_t], s_len[keep_s], t_len[keep_t], gold_d, None),
            )
            for kind, se, te, sl, tl, g, done in runs:
                if not len(se) or not len(te):
                    continue
                pred = _ranges(done if done is not None else align(se, te, sl, tl, config))
                const = np.full_like(se[:1], 1.0 / np.sqrt(se.shape[1]))  # every cosine 1: lengths decide
                base = _ranges(align(np.repeat(const, len(se), 0), np.repeat(const, len(te), 0), sl, tl, config))
                if kind == "blocks":
                    _accumulate(counts["raw"], pred, g)
                _accumulate(counts[kind], project(pred, g), g)
                _accumulate(counts["lengths" if kind == "blocks" else "dropped lengths"], project(base, g), g)
        res = {k: _prf(c) for k, c in counts.items()}
        print(
            f"\n== alignment en-{lang}, {collection}: {len(pages)} {'test ' if collection == COLLECTION else ''}"
            f"pages whose blocks line up, {n_sents} English sentences, {n_gold} gold block beads, aligned in "
            f"{t_align:.1f} s =="
        )
        for kind, label in (
            ("raw", "sentence beads vs block ladder"),
            ("blocks", "projected onto blocks"),
            ("lengths", "lengths only, projected"),
            ("dropped", f"{args.drop:.0%} of blocks removed"),
            ("dropped lengths", "  the same, lengths only"),
        ):
            (sp, sr, sf), (lp, lr, lf) = res[kind]
            print(f"  {label:<32} strict P {sp:.3f} R {sr:.3f} F1 {sf:.3f} | lax P {lp:.3f} R {lr:.3f} F1 {lf:.3f}")
        out[collection] = res
    return out


def _ranges(beads) -> list[tuple[range, range]]:
    return [(range(b.src_start, b.src_end), range(b.tgt_start, b.tgt_end)) for b in beads]


def _accumulate(c: list[int], pred, gold) -> None:
    """Micro-averaged counts: strict correct, lax-correct predictions, lax-recalled gold, n_pred, n_gold."""
    strict, lax = score_alignment(pred, gold)
    n_pred = sum(1 for s, t in pred if len(s) and len(t))
    n_gold = sum(1 for s, t in gold if len(s) and len(t))
    c[0] += round(strict.precision * n_pred)
    c[1] += round(lax.precision * n_pred)
    c[2] += round(lax.recall * n_gold)
    c[3] += n_pred
    c[4] += n_gold


def _prf(c: list[int]) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    def f(p: float, r: float) -> float:
        return 2 * p * r / (p + r) if p + r else 0.0

    sp, sr = c[0] / max(c[3], 1), c[0] / max(c[4], 1)
    lp, lr = c[1] / max(c[3], 1), c[2] / max(c[4], 1)
    return (sp, sr, f(sp, sr)), (lp, lr, f(lp, lr))
