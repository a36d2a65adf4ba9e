"""Which exact kNN path runs: one place for the choice that ``knn_search`` / ``knn_both`` and the index shards make.

With ``compute`` left to the default, ``hw.knn_path()`` decides: bf16 tiles on a visible GPU (``device``), else
int8 or bf16 tiles on the CPU (``lowp``), else fp32. An explicit ``compute`` picks that CPU arithmetic. All paths
give the fp32 neighbours and similarities (to 1e-6); empty sides take the fp32 path (nothing to compute).
"""

from __future__ import annotations

import numpy as np

from mining.core.hw import Compute, Device, knn_path
from mining.core.knn.device import knn_both_ways_device, knn_exact_device
from mining.core.knn.exact import knn_both_ways, knn_exact
from mining.core.knn.lowp import knn_both_ways_lowp, knn_exact_lowp
from mining.core.types import KnnResult


def _choose(compute: Compute | None, queries: np.ndarray, base: np.ndarray) -> tuple[Compute, Device]:
    if not len(queries) or not len(base):
        return Compute.FP32, Device.CPU
    return knn_path() if compute is None else (compute, Device.CPU)


def exact_one_way(
    queries: np.ndarray, base: np.ndarray, k: int, *, compute: Compute | None = None, **params: object
) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k of each query among the base rows by the chosen path. ``batch_size`` only applies to fp32
    (faiss' flat search), ``workers`` only to the CPU tile paths; the others ignore them."""
    chosen, where = _choose(compute, queries, base)
    if chosen is Compute.FP32:
        return knn_exact(queries, base, k, **params)  # type: ignore[arg-type]
    params.pop("batch_size", None)
    if where is Device.CUDA:
        params.pop("workers", None)
        return knn_exact_device(queries, base, k, device="cuda", **params)  # type: ignore[arg-type]
    return knn_exact_lowp(queries, base, k, compute=chosen, **params)  # type: ignore[arg-type]


def exact_both_ways(
    src: np.ndarray, tgt: np.ndarray, k: int, *, compute: Compute | None = None, **params: object
) -> KnnResult:
    """Exact top-k both ways from one pass of tiles by the chosen path (``workers`` only for the CPU paths)."""
    chosen, where = _choose(compute, src, tgt)
    if chosen is Compute.FP32:
        return knn_both_ways(
            np.asarray(src, dtype=np.float32),
            np.asarray(tgt, dtype=np.float32),
            k,
            **params,  # type: ignore[arg-type]
        )
    if where is Device.CUDA:
        params.pop("workers", None)
        return knn_both_ways_device(src, tgt, k, device="cuda", **params)  # type: ignore[arg-type]
    return knn_both_ways_lowp(src, tgt, k, compute=chosen, **params)  # type: ignore[arg-type]
