"""Third-language share of documents, and what it does to rerank's choice between two near-identical sources."""

import numpy as np
import pytest

from mining.core.docembed import Documents
from mining.core.docmethod import DocMethod
from mining.core.docrun import DocMatchConfig, match_documents
from mining.core.docsites import match_groups, site_groups
from mining.core.langshare import corpus_languages, third_language_share


def test_share_counts_characters_of_the_corpus_other_languages_only():
    texts = ["Das Menü Farben", "Posterize reduces the number of colours.", "Note", "ok", "Le menu Couleurs"]
    detected = ["de", "en", "rw", "", "fr"]
    offsets = np.array([0, 3, 4, 5])
    share = third_language_share(texts, detected, offsets, ("en", "fr"), {"en", "fr", "de", "es"})
    # page 0: 15 German characters of 15 + 40 + 4 ('rw' is no language of the corpus); page 1: none; page 2: French
    # is one of the pair's languages
    assert share.tolist() == pytest.approx([15 / 59, 0.0, 0.0])


def test_share_of_an_empty_document_is_zero_and_bad_input_is_named():
    assert third_language_share([], [], np.array([0, 0]), ("en", "fr"), {"de"}).tolist() == [0.0]
    with pytest.raises(ValueError, match="2 sentences but 1 detected"):
        third_language_share(["a", "b"], ["en"], np.array([0, 2]), ("en", "fr"), {"de"})
    with pytest.raises(ValueError, match="offsets"):
        third_language_share(["a", "b"], ["en", "en"], np.array([0, 1]), ("en", "fr"), {"de"})


def test_corpus_languages_drop_rare_misreadings():
    assert corpus_languages({"en": 900, "fr": 80, "pcm": 1, "": 5, "de": 19}) == {"en", "fr", "de"}
    assert corpus_languages({}) == set()


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _rerank(src, tgt, config, urls):
    return match_documents(DocMethod.RERANK, src, tgt, config, urls=urls)


@pytest.mark.parametrize("first", [0, 1])
def test_foreign_weight_prefers_the_source_without_third_language_text(first):
    # two English pages with the same text (one is the German section's untranslated copy) and one French page:
    # without the share, either may get it; with it, the page with no German text does
    rng = np.random.default_rng(3)
    emb = _unit(rng.normal(size=(3, 16)))
    foreign = np.array([0.2, 0.0]) if first == 0 else np.array([0.0, 0.2])
    src = Documents(np.array([0, 3, 6]), None, np.vstack([emb, emb]), foreign)
    tgt = Documents(np.array([0, 3]), None, emb, np.array([0.0]))
    groups = site_groups(["s.org", "s.org"], ["s.org"])
    result = match_groups(src, tgt, groups, DocMatchConfig(k=1, foreign_weight=0.2), _rerank)
    assert result.src.tolist() == [1 - first] and result.tgt.tolist() == [0]
    assert result.evidence[0]["foreign"] == {"src": 0.0, "tgt": 0.0, "weight": 0.2}
    off = match_documents(DocMethod.RERANK, src, tgt, DocMatchConfig(k=1, foreign_weight=0.0))
    assert "foreign" not in off.evidence[0]


def test_documents_check_the_share_count():
    with pytest.raises(ValueError, match="2 documents but 1 third-language"):
        Documents(np.array([0, 1, 2]), ["a", "b"], None, np.array([0.0]))
