"""Language markers in URLs: a table of real URL shapes, keys of translated pages, and pair signals."""

import numpy as np
import pytest

from mining.core.urlsignals import marker_language, url_markers, url_pairs

# (URL, its language markers, where they are) for shapes seen on real multilingual sites
SHAPES = [
    ("https://www.debian.org/releases/stable/fr/index.html", ("fr",), ("path",)),
    ("https://docs.djangoproject.com/en/5.2/topics/i18n/", ("en",), ("path",)),
    ("https://support.mozilla.org/fr-FR/kb/firefox", ("fr",), ("path",)),
    ("https://www.gnu.org/licenses/gpl-3.0.de.html", ("de",), ("suffix",)),
    ("https://www.debian.org/intro/about.it.html", ("it",), ("suffix",)),
    ("https://httpd.apache.org/docs/2.4/index.html.fr", ("fr",), ("suffix",)),
    ("https://fr.wikipedia.org/wiki/Paris", ("fr",), ("subdomain",)),
    ("https://pt-br.libreoffice.org/ajuda/", ("pt",), ("subdomain",)),
    ("https://www.google.com/search?q=x&hl=de", ("de",), ("query",)),
    ("https://example.com/page.php?id=7&lang=en-US", ("en",), ("query",)),
    ("https://example.com/index.php?title=Main&uselang=es", ("es",), ("query",)),
    ("https://www.example.eu/english/about-us", ("en",), ("path",)),
    ("https://www.example.eu/francais/a-propos", ("fr",), ("path",)),
    ("https://www.example.ch/deutsch/kontakt.html", ("de",), ("path",)),
    ("https://example.org/fra/contact", ("fr",), ("path",)),
    ("https://example.org/docs/guide_fr.html", ("fr",), ("suffix",)),
    ("https://example.org/docs/guide-de.html", ("de",), ("suffix",)),
    ("https://www.example.com/products/how-to", (), ()),  # '-to' ends ordinary slugs
    ("https://www.example.com/2020/05/news.html", (), ()),
    ("https://www.example.co.uk/about", (), ()),
    ("https://www.example.com/us/store", (), ()),  # a country, not a language
    ("https://en.example.org/de/page", ("en", "de"), ("subdomain", "path")),
]


@pytest.mark.parametrize(("url", "langs", "places"), SHAPES)
def test_markers_of_real_url_shapes(url, langs, places):
    m = url_markers(url)
    assert (m.langs, m.places) == (langs, places)


def test_a_two_letter_segment_is_a_marker_wherever_it_stands():
    # docs.python.org/3/es/...: 'es' is the language segment after the version
    assert url_markers("https://docs.python.org/3/es/library/os.html").langs == ("es",)


@pytest.mark.parametrize(
    ("token", "code"),
    [("fr", "fr"), ("FR", "fr"), ("fr-FR", "fr"), ("fr_ca", "fr"), ("zh-Hant", "zh"), ("pt-BR", "pt"),
     ("english", "en"), ("Deutsch", "de"), ("français", "fr"), ("espanol", "es"), ("fra", "fr"), ("eng", "en"),
     ("ger", "de"), ("no", "nb"), ("xx", None), ("the", None), ("index", None), ("us", None), ("", None)],
)  # fmt: skip
def test_marker_language_variants(token, code):
    assert marker_language(token) == code


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("https://example.org/en/docs/a.html", "https://example.org/fr-fr/docs/a.html"),
        ("http://en.example.org/a/b", "http://fr.example.org/a/b"),
        ("https://www.example.org/a?lang=en&id=3", "https://example.org/a?id=3&lang=fr"),
        ("https://example.org/ch01.en.html", "https://example.org/ch01.fr.html"),
        ("https://example.org/english/x", "https://example.org/french/x"),
    ],
)
def test_translations_differ_only_by_markers(a, b):
    ma, mb = url_markers(a), url_markers(b)
    assert ma.key == mb.key and ma.lang == "en" and mb.lang == "fr"


def test_url_pairs_signal_agreeing_and_contradicting_markers():
    src = ["https://s.org/en/a", "https://s.org/en/b", "https://s.org/en/c", "https://s.org/x", ""]
    tgt = ["https://s.org/fr/b", "https://s.org/fr/a", "https://s.org/de/c", "https://s.org/fr/x"]
    # the page at /de/c is in French: its marker contradicts the document's language
    pairs = url_pairs(src, tgt, ["en"] * 5, ["fr", "fr", "fr", "fr"])
    assert pairs.src.tolist() == [0, 1, 2] and pairs.tgt.tolist() == [1, 0, 2]
    assert pairs.signal.tolist() == [1.0, 1.0, 0.0]
    assert [a.tolist() for a in pairs.matches()] == [[0, 1], [1, 0]]
    assert pairs.lookup(np.array([0, 0, 2, 3]), np.array([1, 0, 2, 3]), 4).tolist() == [1.0, 0.0, 0.0, 0.0]


def test_url_pairs_need_different_markers():
    pairs = url_pairs(["https://s.org/en/a"], ["https://s.org/en/a?x=1", "https://s.org/en/a"], ["en"], ["fr", "fr"])
    assert len(pairs) == 0
