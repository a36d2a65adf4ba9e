"""The dataset builders on a real page of the GIMP manual in English and French."""

from pathlib import Path

from scripts.data_sources import catalogue_pairs, html_blocks
from scripts.fetch_data import aligned_sentences

MANUALS = Path(__file__).resolve().parents[1] / "data" / "manuals"


def test_html_blocks_keep_paragraphs_and_skip_code():
    en = next(MANUALS.glob("*.en.html"))
    title, blocks = html_blocks(en)
    assert title and len(blocks) > 5
    assert all("\n" not in b and "  " not in b for b in blocks)
    assert not any("<" in b and ">" in b and "script" in b for b in blocks)


def test_translated_pages_line_up_into_sentence_pairs():
    en, fr = next(MANUALS.glob("*.en.html")), next(MANUALS.glob("*.fr.html"))
    pairs = list(aligned_sentences({"page": html_blocks(en)}, {"page": html_blocks(fr)}, "fr"))
    assert (
        "This command closes all images you have opened.",
        "Cette commande ferme toutes les images ouvertes.",
        "page",
    ) in pairs
    assert all(a != b and doc == "page" for a, b, doc in pairs)


def test_catalogue_pairs_skip_untranslated_and_identical(tmp_path):
    po = tmp_path / "x.po"
    po.write_text(
        'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgid "Open the file"\nmsgstr "Ouvrir le fichier"\n\n'
        'msgid "Same"\nmsgstr "Same"\n\nmsgid "Missing"\nmsgstr ""\n\n'
        '#, fuzzy\nmsgid "Fuzzy one"\nmsgstr "Flou"\n',
        encoding="utf-8",
    )
    assert list(catalogue_pairs(str(po))) == [("Open the file", "Ouvrir le fichier")]
