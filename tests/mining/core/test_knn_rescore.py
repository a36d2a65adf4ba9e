"""candidate_dots (the bf16 search's exact re-score) against float64 numpy."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.knn.rescore import candidate_dots


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_candidate_dots_equal_float64_products(dtype: type) -> None:
    rng = np.random.default_rng(3)
    q = rng.standard_normal((300, 37)).astype(dtype)  # 300 rows: more than one gathered block, odd d
    b = rng.standard_normal((50, 37)).astype(dtype)
    ids = rng.integers(0, 50, size=(300, 7))
    want = np.einsum("id,ikd->ik", q.astype(np.float64), b.astype(np.float64)[ids])
    got = candidate_dots(q, b, ids)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_candidate_dots_rejects_ids_outside_the_base() -> None:
    q, b = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        candidate_dots(q, b, np.array([[0, 4], [1, 2]]))
    assert candidate_dots(q, b, np.zeros((2, 0), np.int64)).shape == (2, 0)
