"""Document matching within sites: candidate pairs only between pages of the same site.

A crawl's translated pages live on the same site, so a run can compare each page only with the pages of its own site
(registered domain, or host) instead of every page of every site: the work falls roughly with the number of sites and
pages of other sites can no longer be picked. `site_groups` lists the sites both sides have, `pack_groups` batches
them into shards of about the same size (a big site alone, small ones together) so that a crawl of many sites spreads
over the workers, and `match_groups` runs a document method inside each site and lays the results out as one
`DocumentMatch` over the whole sides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .enums import SiteScope as SiteScope  # the run parameters and services name it here
from .urlsignals import UrlPairs, url_pairs

if TYPE_CHECKING:  # the matching modules load torch: they are imported where a group is matched
    from .docembed import Documents
    from .docrun import DocMatchConfig, DocumentMatch


@dataclasses.dataclass(frozen=True)
class Group:
    """One site's documents on each side (indices into the whole sides, ascending)."""

    key: str
    src: np.ndarray
    tgt: np.ndarray

    @property
    def size(self) -> int:
        return len(self.src) + len(self.tgt)


def site_groups(src_keys: Sequence[str], tgt_keys: Sequence[str]) -> list[Group]:
    """The sites both sides have pages of, largest first (then by key); pages of a site only one side has, and pages
    without a site key (''), are in no group."""
    s_keys = np.asarray(src_keys, dtype=object)
    t_keys = np.asarray(tgt_keys, dtype=object)
    both = (set(s_keys.tolist()) & set(t_keys.tolist())) - {""}
    groups = [
        Group(k, np.flatnonzero(s_keys == k).astype(np.int64), np.flatnonzero(t_keys == k).astype(np.int64))
        for k in sorted(both)
    ]
    return sorted(groups, key=lambda g: (-g.size, g.key))


def pack_groups(groups: Sequence[Group], max_docs: int) -> list[list[int]]:
    """Group numbers per shard, packed first-fit decreasing: largest group first, each into the least-loaded shard
    it fits in (together at most `max_docs` documents), else into a new shard (so a larger group is alone)."""
    if max_docs < 1:
        raise ValueError(f"max_docs must be >= 1, got {max_docs}")
    shards: list[list[int]] = []
    load: list[int] = []
    for i in sorted(range(len(groups)), key=lambda i: (-groups[i].size, groups[i].key)):
        size = groups[i].size
        fits = [j for j in range(len(shards)) if load[j] + size <= max_docs]
        if fits:
            j = min(fits, key=lambda j: (load[j], j))
            shards[j].append(i)
            load[j] += size
        else:
            shards.append([i])
            load.append(size)
    return [sorted(s) for s in shards]


def _subset(docs: Documents, rows: np.ndarray) -> Documents:
    """The documents `rows` of a side (their sentences and embedding rows), in that order."""
    from .docembed import Documents

    starts, stops = docs.offsets[rows], docs.offsets[rows + 1]
    lengths = stops - starts
    idx = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(int(lengths.sum()))
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    sentences = [docs.sentences[i] for i in idx.tolist()] if docs.sentences is not None else None
    emb = docs.emb[idx] if docs.emb is not None else None
    return Documents(offsets, sentences, emb)


Matcher = Callable[["Documents", "Documents", "DocMatchConfig", "UrlPairs | None"], "DocumentMatch"]


def match_groups(
    src: Documents,
    tgt: Documents,
    groups: Sequence[Group],
    config: DocMatchConfig,
    matcher: Matcher,
    *,
    urls: tuple[Sequence[str], Sequence[str], Sequence[str], Sequence[str]] | None = None,
) -> DocumentMatch:
    """Match inside each group with `matcher` (a document method on one group's two sides) and put the results
    together over the whole sides, by score descending.

    Args:
        src, tgt: each side's documents.
        groups: the sites (`site_groups`), or any partition of the pages to match within.
        config: the method's settings; `k` and `top_n` are clipped to each group's sizes by the methods.
        matcher: (group's src, group's tgt, config, group's URL pairs or None) -> DocumentMatch.
        urls: (src urls, tgt urls, src langs, tgt langs) of every document, for the URL signal; None: not read.
    """
    parts: list[tuple[Group, DocumentMatch]] = []
    for g in groups:
        g_urls = None
        if urls is not None:
            su, tu, sl, tl = urls
            g_urls = url_pairs(
                [su[i] for i in g.src.tolist()],
                [tu[j] for j in g.tgt.tolist()],
                [sl[i] for i in g.src.tolist()],
                [tl[j] for j in g.tgt.tolist()],
            )
        parts.append((g, matcher(_subset(src, g.src), _subset(tgt, g.tgt), config, g_urls)))
    return combine_matches(parts, src.n_docs, config.ranked)


def combine_matches(parts: Sequence[tuple[Group, DocumentMatch]], n_src: int, ranked: int) -> DocumentMatch:
    """Per-group results (indices local to their group) as one result over the whole sides, by score descending;
    sources in no group rank nothing (-1)."""
    from .docrun import DocumentMatch

    ranked_all = np.full((n_src, ranked), -1, np.int64)
    cols: dict[str, list[np.ndarray]] = {"src": [], "tgt": [], "cosine": [], "score": [], "reason": []}
    evidence: list[dict[str, Any]] = []
    stats: dict[str, Any] = {"sites_matched": 0}
    for g, m in parts:
        cols["src"].append(g.src[m.src])
        cols["tgt"].append(g.tgt[m.tgt])
        cols["cosine"].append(m.cosine)
        cols["score"].append(m.score)
        cols["reason"].append(m.filter_reason)
        evidence += [{**ev, "site": g.key} for ev in m.evidence]
        r = m.ranked[:, :ranked]
        ranked_all[g.src, : r.shape[1]] = np.where(r >= 0, g.tgt[np.maximum(r, 0)], -1)
        stats["sites_matched"] += 1
        for key, value in m.stats.items():
            if isinstance(value, int | float) and not isinstance(value, bool) and key.startswith(("candidates", "url")):
                stats[key] = stats.get(key, 0) + value
            elif key not in stats:
                stats[key] = value
    if not parts:
        z = np.zeros(0, np.int64)
        return DocumentMatch(z, z, np.zeros(0), np.zeros(0), np.zeros(0, object), [], ranked_all, stats)
    score = np.concatenate(cols["score"]).astype(np.float64)
    order = np.argsort(-score, kind="stable")
    return DocumentMatch(
        np.concatenate(cols["src"]).astype(np.int64)[order],
        np.concatenate(cols["tgt"]).astype(np.int64)[order],
        np.concatenate(cols["cosine"]).astype(np.float64)[order],
        score[order],
        np.concatenate(cols["reason"]).astype(object)[order],
        [evidence[i] for i in order.tolist()],
        ranked_all,
        stats,
    )
