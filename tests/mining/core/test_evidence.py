"""Evidence features on hand-made pairs (values asserted)."""

import numpy as np
import pytest

from mining.core.evidence import BASE_FEATURES, DICT_FEATURES, pair_evidence, text_info

EN_FR = {
    "file": frozenset({"fichier", "dossier"}),
    "open": frozenset({"ouvrir"}),
    "house": frozenset({"maison"}),
    "rooms": frozenset({"chambres", "pièces"}),
}
FR_EN = {"fichier": frozenset({"file"}), "maison": frozenset({"house"}), "chambres": frozenset({"rooms"})}


def test_text_info_separates_placeholders_verbatim_and_numbers():
    info = text_info("See http://x.org/a1 and /etc/apt/sources.list, %1$s or {0}: 1,500 files (APT_CONFIG)?")
    assert info.placeholders == {"%1$s": 1, "{0}": 1}
    assert info.verbatim == {"http://x.org/a1": 1, "/etc/apt/sources.list": 1, "APT_CONFIG": 1}
    assert info.numbers == {"1500": 1}
    assert info.end == "?"


def test_numbers_agree_across_decimal_conventions():
    ev = pair_evidence(["It has 1,500 pages and 3 files."], ["Il a 1 500 pages et 3 fichiers."])
    assert ev.column("numbers_any")[0] == 1.0
    assert ev.column("numbers_mismatch")[0] == 0.0


def test_values_of_a_small_batch():
    src = ["Cannot open the file %s: 15 bytes read.", "The house has 3 rooms.", "Open GIMP now?"]
    tgt = ["Impossible d'ouvrir le fichier %s : 15 octets lus.", "La maison a 4 chambres.", "Ouvrez Debian."]
    ev = pair_evidence(src, tgt, src_to_tgt=EN_FR, tgt_to_src=FR_EN)
    assert ev.names == BASE_FEATURES + DICT_FEATURES
    assert ev.used == ("text", "dictionary")
    np.testing.assert_allclose(ev.column("numbers_mismatch"), [0.0, 1.0, 0.0])
    np.testing.assert_allclose(ev.column("placeholders_any"), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(ev.column("placeholders_mismatch"), [0.0, 0.0, 0.0])
    np.testing.assert_allclose(ev.column("names_missing"), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(ev.column("punct_mismatch"), [0.0, 0.0, 1.0])
    # src 0: open (ouvrir ~ ouvrir via "ouvri"), file (fichier) of 2 known words; src 1: house, rooms both found
    np.testing.assert_allclose(ev.column("dict_src"), [1.0, 1.0, 0.0])
    # tgt 0: fichier -> file found; tgt 1: maison, chambres found; tgt 2: no known word
    np.testing.assert_allclose(ev.column("dict_tgt"), [1.0, 1.0, 0.0])
    log_ratio = np.log([50 / 39, 23 / 22, 14 / 14])  # characters of each side
    np.testing.assert_allclose(ev.column("length_dev"), np.abs(log_ratio - np.median(log_ratio)))


def test_verbatim_and_identical():
    ev = pair_evidence(
        ["Edit /etc/hosts with nano editor now", "Edit /etc/hosts with nano editor now"],
        ["Modifiez /etc/hosts avec nano", "Modifiez /etc/fstab avec nano"],
    )
    np.testing.assert_allclose(ev.column("verbatim_mismatch"), [0.0, 1.0])
    # distinct 3+ letter words: {edit, with, nano, editor, now} vs {modifiez, avec, nano}: 1 of 3
    np.testing.assert_allclose(ev.column("identical"), [1 / 3, 1 / 3])


def test_no_dictionary_drops_its_features_and_empty_input():
    ev = pair_evidence(["a b c"], ["d e f"], src_to_tgt=EN_FR)
    assert ev.names == BASE_FEATURES and ev.used == ("text",)
    assert pair_evidence([], []).values.shape == (0, len(BASE_FEATURES))
    with pytest.raises(ValueError):
        pair_evidence(["a"], [])
