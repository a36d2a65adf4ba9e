"""Load a corpus's gold pairs and unpaired sentences into a BUCC-style test set (the split and the scoring are in
mining.core.evaluation_report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import Corpus, GoldSentencePair, Sentence

if TYPE_CHECKING:
    from ..core.evaluation import BuccSet


def gold_pairs_of(corpus: Corpus, src_lang: str, tgt_lang: str) -> list[tuple[str, str]]:
    """The corpus's gold sentence pairs between two languages, as (src text, tgt text), in either stored direction."""
    pairs: list[tuple[str, str]] = []
    qs = GoldSentencePair.objects.filter(corpus=corpus).values_list("src__lang", "src__text", "tgt__lang", "tgt__text")
    for s_lang, s_text, t_lang, t_text in qs.iterator(chunk_size=20_000):
        if (s_lang, t_lang) == (src_lang, tgt_lang):
            pairs.append((s_text, t_text))
        elif (s_lang, t_lang) == (tgt_lang, src_lang):
            pairs.append((t_text, s_text))
    return pairs


def bucc_from_corpus(
    corpus: Corpus,
    src_lang: str,
    tgt_lang: str,
    *,
    parallel_share: float = 0.04,
    n_gold: int | None = None,
    min_words: int = 5,
    seed: int = 0,
) -> BuccSet:
    """A BUCC-style set from a corpus's gold pairs.

    The gold pairs are split three ways: a small share stays parallel; of the rest, one half gives only its source
    side and the other half only its target side, so those sentences are non-parallel to everything on the other
    side. Sentences without any gold pair join the distractors too.
    """
    from ..core.evaluation import build_bucc  # the kNN engines load here, not where the web tier imports this
    from ..core.evaluation_report import split_gold

    pairs = gold_pairs_of(corpus, src_lang, tgt_lang)
    if not pairs:
        raise ValueError(f"corpus '{corpus}' has no gold {src_lang}-{tgt_lang} sentence pairs")
    split = split_gold(len(pairs), parallel_share=parallel_share, n_gold=n_gold, seed=seed)
    gold = [pairs[i] for i in split.parallel]
    src_d = [pairs[i][0] for i in split.src_only]
    tgt_d = [pairs[i][1] for i in split.tgt_only]
    paired = GoldSentencePair.objects.filter(corpus=corpus)
    for lang, bucket in ((src_lang, src_d), (tgt_lang, tgt_d)):
        unpaired = (
            Sentence.objects.filter(corpus=corpus, lang=lang)
            .exclude(id__in=paired.values("src_id"))
            .exclude(id__in=paired.values("tgt_id"))
        )
        bucket.extend(unpaired.values_list("text", flat=True).iterator(chunk_size=20_000))
    n_distractors = None
    if n_gold:
        n_distractors = int(n_gold * (1 - parallel_share) / parallel_share)
    return build_bucc(gold, src_d, tgt_d, min_words=min_words, seed=seed, n_distractors=n_distractors)
