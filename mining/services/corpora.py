"""Corpus-level services."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count

from ..models import Corpus, Document, GoldDocumentPair, GoldSentencePair, Sentence


@transaction.atomic
def corpus_refresh_stats(*, corpus: Corpus) -> dict:
    """Recount a corpus's documents, sentences and gold pairs per language and store them in `corpus.stats`."""
    per_lang = {
        row["lang"]: {"documents": row["n"]}
        for row in Document.objects.filter(corpus=corpus).values("lang").annotate(n=Count("id"))
    }
    for row in Sentence.objects.filter(corpus=corpus).values("lang").annotate(n=Count("id")):
        per_lang.setdefault(row["lang"], {"documents": 0})["sentences"] = row["n"]
    stats = {
        **corpus.stats,
        "documents": sum(v.get("documents", 0) for v in per_lang.values()),
        "sentences": sum(v.get("sentences", 0) for v in per_lang.values()),
        "gold_sentence_pairs": GoldSentencePair.objects.filter(corpus=corpus).count(),
        "gold_document_pairs": GoldDocumentPair.objects.filter(corpus=corpus).count(),
        "per_language": per_lang,
    }
    Corpus.objects.filter(pk=corpus.pk).update(stats=stats, languages=sorted(per_lang))
    corpus.stats, corpus.languages = stats, sorted(per_lang)
    return stats
