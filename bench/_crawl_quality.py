"""Document matching on a crawl (scripts/build_crawl.py): pages matched within their sites or across all sites, with
and without the URL language-marker signal, scored against the gold page ids; the URL weight chosen
leave-one-site-out. No database: the WARC files are read with the importer's reader, matched with mining.core.

Rows (per language pair; sites and pages counted): P@1 (share of gold source pages whose kept pair is their gold
translation), pair precision / recall / F1 of the kept pairs against the gold pairs, and the seconds the matching took
(embeddings given; the sentence-vote rows time the method whose sentence kNN runs over every target sentence, the
cost that falls with the number of sites). The weight of the URL signal is picked for each site on the other sites
only (grid `URL_GRID`, best summed P@1 over them), then that site is scored with it: the "URL weight LOCO" row never
scores a site with a weight tuned on it. A per-site table shows what the signal adds or costs by URL scheme.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mining.core.docembed import Documents
from mining.core.docfilter import document_stats
from mining.core.docmethod import DocMethod
from mining.core.docrun import DocMatchConfig, DocumentMatch, match_documents
from mining.core.docsites import Group, match_groups, site_groups
from mining.core.langshare import corpus_languages, third_language_share
from mining.core.urlsignals import url_pairs
from mining.ingest.crawl import CrawlOptions, CrawlPage, Extractor, PageBuilder, read_crawl

URL_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)
FOREIGN_GRID = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0)


@dataclass
class Side:
    urls: list[str]
    sites: list[str]
    langs: list[str]
    offsets: np.ndarray
    sentences: list[str]
    detected: list[str]
    emb: np.ndarray | None = None
    foreign: np.ndarray | None = None  # third-language share per page (`langshare`)

    def documents(self) -> Documents:
        return Documents(self.offsets, self.sentences, self.emb, self.foreign)


def read_pages(folder: Path, extractor: Extractor) -> tuple[list[CrawlPage], float]:
    """Every page of the crawl's WARC files (one reader state, so duplicates across files are dropped) and the CPU
    seconds the reading took."""
    builder = PageBuilder(CrawlOptions(extractor=extractor))
    pages: list[CrawlPage] = []
    t0 = time.process_time()
    for path in sorted(folder.glob("crawl-*.warc*")):
        pages += [p for p in read_crawl(str(path), builder.options, builder) if isinstance(p, CrawlPage)]
    return pages, time.process_time() - t0


def side_of(pages: list[CrawlPage], lang: str) -> Side:
    mine = [p for p in pages if p.lang == lang]
    lengths = [len(p.sentences) for p in mine]
    return Side(
        [p.url for p in mine],
        [p.site for p in mine],
        [p.lang for p in mine],
        np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        [s for p in mine for s in p.sentences],
        [c for p in mine for c in p.detected],
    )


def with_foreign(src: Side, tgt: Side, pages: list[CrawlPage]) -> None:
    """Set both sides' third-language shares: text in the crawl's other languages (those of >= 1 % of its pages)."""
    counts: dict[str, int] = {}
    for p in pages:
        counts[p.lang] = counts.get(p.lang, 0) + 1
    languages = corpus_languages(counts)
    pair = (src.langs[0] if src.langs else "", tgt.langs[0] if tgt.langs else "")
    for side in (src, tgt):
        side.foreign = third_language_share(side.sentences, side.detected, side.offsets, pair, languages)


def gold_pairs(folder: Path, src: Side, tgt: Side, src_lang: str = "en", tgt_lang: str = "") -> dict[int, int]:
    """source index -> target index of the pages that translate each other (same gold page id), counting only pages
    published as the side's language (a German page left in English, detected as English, is no English source)."""
    page_of: dict[str, tuple[str, str]] = {}
    with (folder / "gold.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            page_of[row["url"]] = (row["page"], row["lang"])
    tgt_lang = tgt_lang or (tgt.langs[0] if tgt.langs else "")
    by_page = {page_of[u][0]: j for j, u in enumerate(tgt.urls) if u in page_of and page_of[u][1] == tgt_lang}
    return {
        i: by_page[page_of[u][0]]
        for i, u in enumerate(src.urls)
        if u in page_of and page_of[u][1] == src_lang and page_of[u][0] in by_page
    }


def _matcher(src: Documents, tgt: Documents, config: DocMatchConfig, urls, method=DocMethod.RERANK) -> DocumentMatch:
    stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
    return match_documents(method, src, tgt, config, doc_stats=stats, urls=urls)


def _vote(src: Documents, tgt: Documents, config: DocMatchConfig, urls) -> DocumentMatch:
    return _matcher(src, tgt, config, urls, DocMethod.SENTENCE_VOTE)


def run(
    src: Side,
    tgt: Side,
    *,
    within_sites: bool,
    url_weight: float,
    groups=None,
    vote: bool = False,
    foreign_weight: float = 0.0,
) -> tuple[DocumentMatch, float]:
    """Match (rerank, Sentence-Avg retrieval, default pre-filter and vote weight; or full sentence-vote, whose
    sentence kNN over every target sentence grows with both sides); returns the result and seconds."""
    config = replace(DocMatchConfig(), url_weight=url_weight, foreign_weight=foreign_weight)
    matcher = _vote if vote else _matcher
    urls = (src.urls, tgt.urls, src.langs, tgt.langs) if url_weight > 0 else None
    t0 = time.perf_counter()
    if within_sites:
        result = match_groups(
            src.documents(), tgt.documents(), groups or site_groups(src.sites, tgt.sites), config, matcher, urls=urls
        )
    else:
        pairs = url_pairs(*urls) if urls else None
        result = matcher(src.documents(), tgt.documents(), config, pairs)
    return result, time.perf_counter() - t0


def scores(result: DocumentMatch, gold: dict[int, int], only: set[int] | None = None) -> dict[str, float]:
    """P@1 and pair precision / recall / F1 of the kept pairs (of sources in `only`, when given)."""
    keep = result.filter_reason == ""
    chosen = {int(s): int(t) for s, t in zip(result.src[keep], result.tgt[keep], strict=True)}
    if only is not None:
        gold = {s: t for s, t in gold.items() if s in only}
        chosen = {s: t for s, t in chosen.items() if s in only}
    hits = sum(chosen.get(s) == t for s, t in gold.items())
    p = hits / len(chosen) if chosen else 0.0
    r = hits / len(gold) if gold else 0.0
    return {
        "gold": len(gold),
        "p_at_1": hits / len(gold) if gold else 0.0,
        "precision": p,
        "recall": r,
        "f1": 2 * p * r / (p + r) if p + r else 0.0,
    }


def loco_weights(
    src: Side,
    tgt: Side,
    gold: dict[int, int],
    groups: list[Group],
    *,
    grid: tuple[float, ...] = URL_GRID,
    param: str = "url_weight",
    fixed: dict | None = None,
) -> tuple[dict, dict]:
    """Each site's weight `param` chosen on the other sites (best summed P@1 over them; ties: nearer 0.2), and every
    (weight, site) result's hits, for the per-site table. `fixed`: the other weights of every run."""
    site_src = {g.key: set(g.src.tolist()) for g in groups}
    hits: dict[float, dict[str, int]] = {}
    for w in grid:
        kwargs = {"url_weight": 0.0, **(fixed or {}), param: w}
        result, _ = run(src, tgt, within_sites=True, groups=groups, **kwargs)
        hits[w] = {
            k: round(scores(result, gold, s)["p_at_1"] * scores(result, gold, s)["gold"]) for k, s in site_src.items()
        }
    chosen = {}
    for g in groups:
        others = {w: sum(n for k, n in hits[w].items() if k != g.key) for w in grid}
        chosen[g.key] = max(grid, key=lambda w: (others[w], -abs(w - 0.2)))
    return chosen, hits


def _chosen_pairs(result: DocumentMatch) -> dict[int, int]:
    keep = result.filter_reason == ""
    return {int(s): int(t) for s, t in zip(result.src[keep], result.tgt[keep], strict=True)}


def _pair_scores(chosen: dict[int, int], gold: dict[int, int]) -> dict[str, float]:
    hits = sum(chosen.get(s) == t for s, t in gold.items())
    p = hits / len(chosen) if chosen else 0.0
    r = hits / len(gold) if gold else 0.0
    return {"p_at_1": r, "precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0}


def _line(name: str, s: dict[str, float], secs: float | None = None) -> str:
    tail = f"{secs:8.1f}" if secs is not None else f"{'':>8}"
    return (
        f"{name:44} {100 * s['p_at_1']:6.2f} {100 * s['precision']:6.2f} {100 * s['recall']:6.2f} "
        f"{100 * s['f1']:6.2f} {tail}"
    )


def loco_row(
    src: Side, tgt: Side, gold: dict[int, int], groups: list[Group], *, param: str, grid, fixed: dict | None = None
) -> tuple[dict[str, float], dict, dict]:
    """Scores of the pairs each site gets with the weight chosen on the other sites (P@1, precision, F1 all held
    out), the chosen weights and the per-weight hits."""
    chosen_w, hits = loco_weights(src, tgt, gold, groups, grid=grid, param=param, fixed=fixed)
    by_weight = {}
    for w in set(chosen_w.values()):
        result, _ = run(src, tgt, within_sites=True, groups=groups, **{"url_weight": 0.0, **(fixed or {}), param: w})
        by_weight[w] = _chosen_pairs(result)
    pairs: dict[int, int] = {}
    for g in groups:
        mine = set(g.src.tolist())
        pairs.update({s: t for s, t in by_weight[chosen_w[g.key]].items() if s in mine})
    return _pair_scores(pairs, gold), chosen_w, hits


def crawl_rows(folder: Path, lang: str, encode, extractor: Extractor, *, full: bool = True) -> list[str]:
    """The bench's lines for en-`lang` on the crawl in `folder` (`encode(texts, lang)` -> unit embeddings); without
    `full`, only matching within sites with and without the URL signal and the third-language share (to compare
    extractors)."""
    from mining.core.docrun import DEFAULT_FOREIGN_WEIGHT as FW

    pages, cpu = read_pages(folder, extractor)
    src, tgt = side_of(pages, "en"), side_of(pages, lang)
    with_foreign(src, tgt, pages)
    src.emb = encode(src.sentences, "en")
    tgt.emb = encode(tgt.sentences, lang)
    gold = gold_pairs(folder, src, tgt, "en", lang)
    groups = site_groups(src.sites, tgt.sites)
    head = (
        f"en-{lang}, {extractor.value}: {len(set(src.sites) | set(tgt.sites))} sites, {len(src.urls)} en + "
        f"{len(tgt.urls)} {lang} pages ({len(pages)} pages read in {cpu:.0f} CPU s), {len(gold)} gold pairs"
    )
    lines = [head, f"{'condition':44} {'P@1':>6} {'prec':>6} {'rec':>6} {'F1':>6} {'match s':>8}"]
    conditions = [
        ("all sites, no URL signal", False, 0.0, 0.0),
        ("all sites, URL weight 0.2", False, 0.2, 0.0),
        (f"all sites, foreign weight {FW}", False, 0.0, FW),
        ("within sites, no URL signal", True, 0.0, 0.0),
        ("within sites, URL weight 0.2", True, 0.2, 0.0),
        (f"within sites, foreign weight {FW}", True, 0.0, FW),
        (f"within sites, URL 0.2 + foreign {FW}", True, 0.2, FW),
    ]
    for name, within, w, fw in conditions if full else conditions[3:]:
        result, secs = run(src, tgt, within_sites=within, url_weight=w, groups=groups, foreign_weight=fw)
        lines.append(_line(name, scores(result, gold), secs))
    s, chosen_f, hits_f = loco_row(src, tgt, gold, groups, param="foreign_weight", grid=FOREIGN_GRID)
    lines.append(_line("within sites, foreign weight LOCO", s))
    s, _, _ = loco_row(src, tgt, gold, groups, param="foreign_weight", grid=FOREIGN_GRID, fixed={"url_weight": 0.2})
    lines.append(_line("within sites, URL 0.2 + foreign LOCO", s))
    tables = [("foreign weight, no URL signal", FOREIGN_GRID, chosen_f, hits_f)]
    if full:
        chosen, hits = loco_weights(src, tgt, gold, groups)
        for name, within in (("sentence-vote, all sites", False), ("sentence-vote, within sites", True)):
            result, secs = run(src, tgt, within_sites=within, url_weight=0.0, groups=groups, vote=True)
            lines.append(_line(name, scores(result, gold), secs))
        loco_hits = sum(hits[chosen[g.key]][g.key] for g in groups)
        lines.append(f"{'within sites, URL weight LOCO':44} {100 * loco_hits / max(len(gold), 1):6.2f}  (P@1 only)")
        tables.insert(0, ("URL weight", URL_GRID, chosen, hits))
    for title, grid, chosen, hits in tables:
        lines.append(f"per site, P@1 at each {title}, and the weight chosen on the other sites:")
        lines.append(f"{'site':24} {'gold':>5} " + " ".join(f"w={w:<4}" for w in grid) + "  LOCO w")
        for g in groups:
            n = sum(1 for s in g.src.tolist() if s in gold)
            if n:
                cells = " ".join(f"{100 * hits[w][g.key] / n:6.1f}" for w in grid)
                lines.append(f"{g.key:24} {n:5d} {cells}  {chosen[g.key]}")
    return lines
