"""Third-language share of documents: how much of a page's text is in one of the corpus's other languages.

A crawled site often serves a page of its English original, untranslated or half translated, inside another
language's section: the German manual's page left in English keeps its German breadcrumbs and notes. Detected as
English, it competes with the real English page for the French translation, and one-to-one selection gives the
French page to either. The real English page has (almost) no text in the corpus's other languages; the copy from
the German section does. Counted on the sentences' detected languages, this share lets the document matcher prefer
the page that has none (`docrun.DocMatchConfig.foreign_weight`), with no URL read.

Measured on the bench's crawl (scripts/build_crawl.py; en-fr, third languages de, es, it): of the pages detected as
English, 78 % of the 902 published in English have no text in a third language, while 97 % of the 348 published in
another language have some (median 18 % of their characters).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np


def third_language_share(
    texts: Sequence[str],
    detected: Sequence[str],
    offsets: np.ndarray,
    pair: Collection[str],
    languages: Collection[str],
) -> np.ndarray:
    """Per document, the share of its characters in sentences detected as one of `languages` other than the pair's.

    Args:
        texts, detected: each sentence's text and detected language code ('' when none was told).
        offsets: (n_docs + 1,) document i owns sentences offsets[i]:offsets[i + 1].
        pair: the two languages being matched (never counted as third).
        languages: the corpus's languages (those of enough of its pages): a sentence misread as some rare language
            is noise, not evidence of another language's section.

    Returns:
        (n_docs,) float64 in [0, 1]; 0 for a document without text.
    """
    if len(texts) != len(detected):
        raise ValueError(f"{len(texts)} sentences but {len(detected)} detected languages")
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(texts) or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must rise from 0 to the number of sentences")
    third = set(languages) - set(pair)
    lengths = np.fromiter((len(t) for t in texts), dtype=np.float64, count=len(texts))
    foreign = np.fromiter((code in third for code in detected), dtype=bool, count=len(detected))
    n_docs = len(offsets) - 1
    doc_of = np.repeat(np.arange(n_docs), np.diff(offsets))
    total = np.bincount(doc_of, weights=lengths, minlength=n_docs)
    other = np.bincount(doc_of, weights=np.where(foreign, lengths, 0.0), minlength=n_docs)
    return np.divide(other, total, out=np.zeros(n_docs), where=total > 0)


def corpus_languages(counts: dict[str, int], *, min_share: float = 0.01) -> set[str]:
    """The languages of at least `min_share` of the documents (`counts`: documents per language code)."""
    total = sum(counts.values())
    return {code for code, n in counts.items() if code and total and n / total >= min_share}
