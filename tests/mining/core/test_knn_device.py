"""The device candidate pass (bf16 tiles and torch top-k, as on a GPU) run on the CPU against the fp32 exact path,
and the dispatch that takes it when a GPU is visible."""

import numpy as np
import pytest

from mining.core import hw
from mining.core.hw import Compute, Device
from mining.core.knn import KnnMethod, knn_both, knn_both_ways, knn_exact, knn_search, route
from mining.core.knn.device import knn_both_ways_device, knn_exact_device
from mining.core.knn.shards import search_exact_shard, search_exact_shard_both
from tests.mining.core.knn_oracle import assert_same_one_way, clustered, unit


@pytest.mark.parametrize(("tile", "margin"), [((7, 13), 8), ((64, 5), 0), ((1000, 1000), 1), ((3, 50), 2)])
def test_device_pass_on_the_cpu_equals_fp32_both_ways(tile: tuple[int, int], margin: int) -> None:
    rng = np.random.default_rng(30)
    # tight clusters: with small margins many rows go through the rescue
    src, tgt = clustered(rng, 150, 32, 5, 0.05), clustered(rng, 120, 32, 5, 0.05)
    res = knn_both_ways_device(src, tgt, 5, device="cpu", tile=tile, margin=margin)
    ref = knn_both_ways(src, tgt, 5)
    assert_same_one_way(res.fwd_sims, res.fwd_ids, ref.fwd_sims, ref.fwd_ids, src, tgt)
    assert_same_one_way(res.bwd_sims, res.bwd_ids, ref.bwd_sims, ref.bwd_ids, tgt, src)
    assert res.info.as_dict()["device"] == "cpu" and res.info.compute is Compute.BF16
    assert res.info.candidates == 5 + margin
    if margin == 0:
        assert res.info.rescued > 0


def test_device_pass_one_direction_with_ties_float16_and_k_past_the_other_side() -> None:
    rng = np.random.default_rng(31)
    b = np.repeat(unit(rng, 9, 16), 4, axis=0).astype(np.float16)  # every similarity tied in fours
    q = clustered(rng, 40, 16, 3, 0.3).astype(np.float16)
    sims, ids = knn_exact_device(q, b, 10, device="cpu", tile=(6, 5), margin=1)
    assert_same_one_way(sims, ids, *knn_exact(q.astype(np.float32), b.astype(np.float32), 10), q, b)
    sims, ids = knn_exact_device(q, b[:3], 10, device="cpu")
    assert ids.shape == (40, 3) and sorted(ids[0].tolist()) == [0, 1, 2]
    sims, ids = knn_exact_device(q[:0], b, 2, device="cpu")
    assert sims.shape == (0, 2)
    with pytest.raises(ValueError, match="margin"):
        knn_exact_device(q, b, 2, device="cpu", margin=-1)


def test_a_visible_gpu_takes_the_device_pass_and_explicit_cpu_arithmetic_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(32)
    q, b = unit(rng, 30, 8), unit(rng, 25, 8)
    calls: list[str] = []

    def on_cpu_both(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(f"both:{kw.pop('device')}")
        return knn_both_ways_device(*a, device="cpu", **kw)

    def on_cpu_one(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(f"one:{kw.pop('device')}")
        return knn_exact_device(*a, device="cpu", **kw)

    monkeypatch.setattr(route, "knn_both_ways_device", on_cpu_both)
    monkeypatch.setattr(route, "knn_exact_device", on_cpu_one)
    monkeypatch.setattr(hw, "cuda_available", lambda: True)
    assert hw.knn_path() == (Compute.BF16, Device.CUDA)
    both = knn_both(q, b, 3, method=KnnMethod.EXACT, workers=2)
    one = knn_search(q, b, 3, method=KnnMethod.EXACT, batch_size=7)
    search_exact_shard(q, b, 3, 100)
    search_exact_shard_both(q, b, 3, 0, 100)
    knn_both(q, b, 3, method=KnnMethod.EXACT, compute=Compute.INT8)  # explicit CPU arithmetic: the CPU path
    assert calls == ["both:cuda", "one:cuda", "one:cuda", "both:cuda"]
    ref = knn_both_ways(q, b, 3)
    assert_same_one_way(both.fwd_sims, both.fwd_ids, ref.fwd_sims, ref.fwd_ids, q, b)
    assert_same_one_way(*one, ref.fwd_sims, ref.fwd_ids, q, b)
