"""k nearest neighbours by inner product over L2-normalised float32 rows, in both directions.

Modules: ``exact`` (flat search, and both directions from one pass of similarity tiles), ``lowp`` (the same from
bf16 or int8 tiles with a proved exact re-score, one direction or both), ``device`` (the bf16 candidate pass on a
GPU), ``route`` (which of them runs), ``ivf`` (an IVF-Flat index trained on a seeded
sample), ``common`` (input checks and helpers both use), ``tiles`` (the heaps the tiled paths share), ``shards``
(searching one index shard and merging the shards' lists). ``knn_search`` and ``knn_both``
dispatch on ``KnnMethod``; ``knn_method_for`` picks one by size. Importing the package loads no engine: the
search functions are imported from their modules on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from mining.core.enums import KnnMethod
from mining.core.hw import Compute

if TYPE_CHECKING:
    import numpy as np

    from mining.core.types import KnnResult

__all__ = [
    "EXACT_MAX_PAIRS",
    "KnnMethod",
    "build_ivf",
    "knn_approx",
    "knn_both",
    "knn_both_ways",
    "knn_both_ways_approx",
    "knn_both_ways_device",
    "knn_both_ways_lowp",
    "knn_exact",
    "knn_exact_device",
    "knn_exact_lowp",
    "knn_method_for",
    "knn_search",
]

# The engines (faiss, numba, torch) load on first use, so the web tier can name ``KnnMethod`` for free.
_LAZY = {
    "build_ivf": "ivf",
    "knn_approx": "ivf",
    "knn_both_ways_approx": "ivf",
    "knn_both_ways": "exact",
    "knn_exact": "exact",
    "knn_both_ways_device": "device",
    "knn_exact_device": "device",
    "knn_both_ways_lowp": "lowp",
    "knn_exact_lowp": "lowp",
}


def __getattr__(name: str) -> object:
    """The search functions of the submodules, imported when first asked for (PEP 562)."""
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# Query x base pairs up to which exact search is the default: 50k x 50k (about 2.6e12 flops at d = 512, some 15 s
# on two cores). IVF overtakes exact at roughly 10-20k rows a side and is 3.6x faster at 100k (measured on 2 cores).
EXACT_MAX_PAIRS = 50_000 * 50_000


def knn_method_for(n_queries: int, n_base: int, *, exact_max_pairs: int = EXACT_MAX_PAIRS) -> KnnMethod:
    """EXACT when n_queries * n_base <= exact_max_pairs (exact is cheap and recall is free there), else IVF."""
    return KnnMethod.EXACT if int(n_queries) * int(n_base) <= exact_max_pairs else KnnMethod.IVF


def knn_search(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    method: KnnMethod = KnnMethod.EXACT,
    *,
    compute: Compute | None = None,
    **params: object,
) -> tuple[np.ndarray, np.ndarray]:
    """One-direction kNN by ``method`` (params go to ``knn_exact[_lowp]`` or ``knn_approx``).

    EXACT runs in ``compute`` arithmetic as ``knn_both`` does: BF16 or INT8 (``knn_exact_lowp``: low-precision
    tiles with the proved exact re-score, the fp32 neighbours and similarities) or FP32 (faiss' flat search);
    default ``hw.knn_path()``: bf16 on a visible GPU (``knn_exact_device``), else the CPU's best. ``batch_size``
    only applies to the FP32 path (the others are tiled).
    """
    from mining.core.knn import ivf, route

    if method is KnnMethod.EXACT:
        return route.exact_one_way(queries, base, k, compute=compute, **params)
    if method is KnnMethod.IVF:
        return ivf.knn_approx(queries, base, k, **params)  # type: ignore[arg-type]
    raise TypeError(f"method must be a KnnMethod, got {method!r}")


def knn_both(
    src: np.ndarray,
    tgt: np.ndarray,
    k: int,
    method: KnnMethod = KnnMethod.EXACT,
    *,
    compute: Compute | None = None,
    **params: object,
) -> KnnResult:
    """Both-direction kNN by ``method`` (params go to ``knn_both_ways[_lowp]`` or ``knn_both_ways_approx``).

    EXACT runs in ``compute`` arithmetic: BF16 or INT8 (low-precision tiles re-scored exactly: the fp32
    neighbours and similarities, several times faster where the CPU has bf16 or int8 units) or FP32; default
    ``hw.knn_path()``: bf16 tiles on a visible GPU (``knn_both_ways_device``), else the CPU's best. The result's
    ``info`` names the path that ran.
    """
    from mining.core.knn import ivf, route

    if method is KnnMethod.EXACT:
        return route.exact_both_ways(src, tgt, k, compute=compute, **params)
    if method is KnnMethod.IVF:
        return ivf.knn_both_ways_approx(src, tgt, k, **params)  # type: ignore[arg-type]
    raise TypeError(f"method must be a KnnMethod, got {method!r}")
