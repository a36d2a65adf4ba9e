"""The compiled top-k pass over bf16, fp32 and int32 tiles against a brute-force oracle (numpy sorts of the whole
matrix)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mining.core.knn.topk import TopK, push_bf16_tile, push_f32_tile, push_int32_tile


def _bf16_matrix(rng: np.random.Generator, n: int, m: int, *, levels: int | None = None) -> torch.Tensor:
    """(n, m) bf16 values in [-1, 1]; with ``levels``, only that many distinct values (many ties)."""
    x = rng.uniform(-1.0, 1.0, size=(n, m)).astype(np.float32)
    if levels is not None:
        x = np.round(x * levels) / levels
    return torch.from_numpy(x).to(torch.bfloat16)


def _as_int32(s: torch.Tensor) -> torch.Tensor:
    """The bf16 values scaled to integers (what an int8 product tile holds), keeping their ties."""
    return (s.to(torch.float32) * 4096).round().to(torch.int32)


def _values(s: torch.Tensor, kind: str) -> np.ndarray:
    """The float values the heaps of ``kind`` tiles of s hold."""
    return (_as_int32(s) if kind == "int32" else s).to(torch.float32).numpy()


def _push_all(
    s: torch.Tensor, k_rows: int, k_cols: int | None, tile: tuple[int, int], *, kind: str = "bf16"
) -> tuple[TopK, TopK | None]:
    """Push s tile by tile: as bf16 bit patterns, as the float32 of its values, or as int32 (``_as_int32``)."""
    n, m = s.shape
    rows, cols = TopK(n, k_rows), (TopK(m, k_cols) if k_cols is not None else None)
    for i0 in range(0, n, tile[0]):
        for j0 in range(0, m, tile[1]):
            part = s[i0 : i0 + tile[0], j0 : j0 + tile[1]].contiguous()
            if kind == "f32":
                push_f32_tile(part.to(torch.float32).numpy(), i0, j0, rows, cols)
            elif kind == "int32":
                push_int32_tile(_as_int32(part).numpy(), i0, j0, rows, cols)
            else:
                push_bf16_tile(part.view(torch.int16).numpy(), i0, j0, rows, cols)
    return rows, cols


def _oracle(v: np.ndarray, k: int) -> np.ndarray:
    """(n, min(k, m)) the k largest values of every row, descending."""
    return -np.sort(-v, axis=1)[:, :k]


def _check(heaps: TopK, v: np.ndarray, k: int) -> None:
    """Values equal the oracle's; every id points at a value equal to its listed one; ids of a row are distinct."""
    vals, ids = heaps.result()
    kk = min(k, v.shape[1])
    np.testing.assert_array_equal(vals[:, :kk], _oracle(v, kk))
    np.testing.assert_array_equal(np.take_along_axis(v, ids[:, :kk], 1), vals[:, :kk])
    assert all(len(set(row)) == kk for row in ids[:, :kk].tolist())
    if k > kk:  # more slots than values: the rest stay empty
        assert np.all(vals[:, kk:] == -np.inf) and np.all(ids[:, kk:] == -1)
    # The K-th value bounds every value left out (what the bf16 proof relies on).
    if kk < v.shape[1]:
        left_out = v.copy()
        np.put_along_axis(left_out, ids[:, :kk], -np.inf, 1)
        assert np.all(left_out.max(axis=1) <= vals[:, kk - 1])


@pytest.mark.parametrize(
    ("n", "m", "k", "tile", "levels"),
    [
        (97, 131, 5, (13, 29), None),  # odd tile sizes, partial last tiles
        (64, 300, 12, (64, 7), None),  # k larger than a tile's width
        (50, 40, 7, (50, 40), 16),  # many ties
        (33, 9, 12, (8, 8), None),  # k larger than the other side
        (200, 180, 3, (37, 41), 3),  # ties everywhere (7 distinct values)
    ],
)
@pytest.mark.parametrize("kind", ["bf16", "f32", "int32"])
def test_both_ways_equal_the_oracle(
    n: int, m: int, k: int, tile: tuple[int, int], levels: int | None, kind: str
) -> None:
    s = _bf16_matrix(np.random.default_rng(n * m + k), n, m, levels=levels)
    rows, cols = _push_all(s, k, k, tile, kind=kind)
    v = _values(s, kind)
    _check(rows, v, k)
    assert cols is not None
    _check(cols, v.T, k)


@pytest.mark.parametrize("kind", ["bf16", "f32", "int32"])
def test_one_direction_and_columns_only_equal_the_oracle(kind: str) -> None:
    s = _bf16_matrix(np.random.default_rng(5), 70, 90)
    v = _values(s, kind)
    rows, _ = _push_all(s, 6, None, (16, 24), kind=kind)
    _check(rows, v, 6)
    empty_rows, cols = _push_all(s, 0, 4, (16, 24), kind=kind)
    assert cols is not None and empty_rows.vals.shape == (70, 0)
    _check(cols, v.T, 4)


def test_signed_zeros_and_negative_values_keep_float_order() -> None:
    x = np.array([[-0.0, 0.0, -1.0, 0.5, -0.25, 1.0]], dtype=np.float32)
    s = torch.from_numpy(x).to(torch.bfloat16)
    rows, cols = _push_all(s, 3, 1, (1, 2))
    vals, ids = rows.result()
    np.testing.assert_array_equal(vals, [[1.0, 0.5, 0.0]])
    assert ids[0, :2].tolist() == [5, 3] and ids[0, 2] in (0, 1)
    assert cols is not None
    np.testing.assert_array_equal(cols.result()[0][:, 0], x[0])


def test_rejects_a_tile_that_does_not_fit() -> None:
    rows, cols = TopK(4, 2), TopK(4, 2)
    bits = torch.zeros((3, 3), dtype=torch.bfloat16).view(torch.int16).numpy()
    with pytest.raises(ValueError, match="does not fit"):
        push_bf16_tile(bits, 2, 0, rows, cols)
    with pytest.raises(ValueError, match="int16"):
        push_bf16_tile(bits.astype(np.int32), 0, 0, rows, cols)
    with pytest.raises(ValueError, match="float32"):
        push_f32_tile(np.zeros((3, 3))[:, :2], 0, 0, rows, cols)
    with pytest.raises(ValueError, match="int32"):
        push_int32_tile(bits, 0, 0, rows, cols)


def test_equal_values_come_in_id_order() -> None:
    s = torch.ones((6, 5), dtype=torch.bfloat16)
    rows, cols = _push_all(s, 3, 2, (4, 3))
    assert rows.result()[1].tolist() == [[0, 1, 2]] * 6
    assert cols is not None and cols.result()[1].tolist() == [[0, 1]] * 5
