"""Reads of the corpora: the corpus list and one corpus's page."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Count, OuterRef, Q, QuerySet

from ..models import Corpus, Document, GoldSentencePair, ImportJob, MiningRun

MAX_SITES_SHOWN = 200


def corpus_list() -> QuerySet[Corpus]:
    """Every corpus by name, with how many runs read it (one query)."""
    n_runs = (
        MiningRun.objects.filter(Q(src_corpus=OuterRef("pk")) | Q(tgt_corpus=OuterRef("pk")))
        .order_by()
        .annotate(c=models.Func(models.F("pk"), function="COUNT"))
        .values("c")
    )
    return Corpus.objects.order_by("name").annotate(n_runs=models.Subquery(n_runs, output_field=models.IntegerField()))


def corpus_detail(*, corpus: Corpus, gold_sample: int = 10) -> dict[str, Any]:
    """One corpus's page: per-language counts, its imports, the runs reading it, its gold pairs per language pair and a
    few of them. A fixed number of queries."""
    per_language = sorted((corpus.stats or {}).get("per_language", {}).items())
    gold = GoldSentencePair.objects.filter(corpus=corpus)
    return {
        "corpus": corpus,
        "per_language": per_language,
        "imports": list(ImportJob.objects.filter(corpus=corpus).order_by("-created_at")[:20]),
        "runs": list(
            MiningRun.objects.filter(Q(src_corpus=corpus) | Q(tgt_corpus=corpus))
            .select_related("src_corpus", "tgt_corpus", "encoder")
            .order_by("-created_at")[:50]
        ),
        "gold_by_pair": list(
            gold.order_by().values_list("src__lang", "tgt__lang").annotate(n=Count("pk")).order_by("-n")
        ),
        "gold_sample": list(gold.select_related("src", "tgt").order_by("id")[:gold_sample]),
        **corpus_sites(corpus=corpus),
    }


def corpus_sites(*, corpus: Corpus, limit: int = MAX_SITES_SHOWN) -> dict[str, Any]:
    """A crawled corpus's sites (registered domains) with their page counts per language, most pages first: one
    grouped query on the (corpus, site, lang) index. {} for a corpus without crawled pages."""
    rows = (
        Document.objects.filter(corpus=corpus)
        .exclude(site="")
        .order_by()
        .values_list("site", "lang")
        .annotate(n=Count("pk"))
    )
    by_site: dict[str, dict[str, int]] = {}
    for site, lang, n in rows:
        by_site.setdefault(site, {})[lang] = n
    if not by_site:
        return {}
    langs = sorted({lang for counts in by_site.values() for lang in counts})
    ordered = sorted(by_site.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    table = [(site, [counts.get(lang, 0) for lang in langs], sum(counts.values())) for site, counts in ordered[:limit]]
    return {"site_languages": langs, "sites": table, "n_sites": len(by_site)}
