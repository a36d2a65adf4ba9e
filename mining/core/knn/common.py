"""Helpers shared by the exact and IVF kNN paths: input checks, empty results, faiss' BLAS block size."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import faiss
import numpy as np

Progress = Callable[[int, int], None]

# faiss' default database block (1024) leaves ~20 % of the GEMM rate on the table at d = 512.
BLAS_DATABASE_BS = 16384


def check_matrix(x: np.ndarray, name: str) -> np.ndarray:
    """Validate a (n, d) matrix and return it as C-contiguous float32 (no copy if already so)."""
    if not isinstance(x, np.ndarray) or x.ndim != 2:
        raise ValueError(f"{name} must be a 2-d numpy array, got {type(x).__name__} {getattr(x, 'shape', None)}")
    return np.ascontiguousarray(x, dtype=np.float32)


def check_pair(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate a (queries, base) pair of matrices of one width and k >= 1; both as C-contiguous float32."""
    q, b = check_matrix(queries, "queries"), check_matrix(base, "base")
    if q.shape[1] != b.shape[1]:
        raise ValueError(f"dimension mismatch: {q.shape[1]} vs {b.shape[1]}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return q, b


def empty_result(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, k) similarities all -inf and ids all -1: no neighbour found yet."""
    return np.full((n, k), -np.inf, dtype=np.float32), np.full((n, k), -1, dtype=np.int64)


@contextlib.contextmanager
def blas_block(bs: int) -> Iterator[None]:
    """Temporarily set faiss' BLAS database block size (a process-wide knob)."""
    old = faiss.cvar.distance_compute_blas_database_bs
    faiss.cvar.distance_compute_blas_database_bs = bs
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_database_bs = old


def missing_to_neg_inf(sims: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """faiss marks missing neighbours with id -1 and a sentinel value; make the value -inf."""
    return np.where(ids >= 0, sims, -np.inf).astype(np.float32)
