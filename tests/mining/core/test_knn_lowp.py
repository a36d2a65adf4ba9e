"""The low-precision exact search (bf16 and int8 tiles; both ways, one way, an index shard) against the fp32 exact
path: same neighbours, same similarities (to 1e-6); the path chosen by the CPU's units and the fp32 fallback."""

import numpy as np
import pytest

from mining.core import hw
from mining.core.hw import Compute, Device
from mining.core.knn import (
    KnnMethod,
    knn_both,
    knn_both_ways,
    knn_both_ways_lowp,
    knn_exact,
    knn_exact_lowp,
    knn_search,
    route,
)
from mining.core.knn import lowp as lowp_module
from mining.core.knn.shards import search_exact_shard, search_exact_shard_both
from tests.mining.core.knn_oracle import assert_same, assert_same_one_way, clustered, unit

LOWP = pytest.mark.parametrize("compute", [Compute.BF16, Compute.INT8], ids=["bf16", "int8"])


@pytest.mark.parametrize("tile", [(1, 1), (7, 13), (64, 5), (1000, 1000), (3, 1000)])
@pytest.mark.parametrize("k", [1, 4])
@LOWP
def test_lowp_matches_fp32_on_random_data(tile: tuple[int, int], k: int, compute: Compute) -> None:
    rng = np.random.default_rng(0)
    src, tgt = unit(rng, 67, 32), unit(rng, 45, 32)
    res = knn_both_ways_lowp(src, tgt, k, tile=tile, compute=compute)
    assert_same(res, knn_both_ways(src, tgt, k), src, tgt)
    assert res.info.compute is compute and res.info.device is Device.CPU
    assert res.info.candidates == k + lowp_module.DEFAULT_MARGIN[compute]


@pytest.mark.parametrize(("margin", "workers"), [(0, 1), (1, 2), (8, 3)])
@LOWP
def test_lowp_matches_fp32_on_clustered_data_and_rescues_close_rows(
    margin: int, workers: int, compute: Compute
) -> None:
    # Tight clusters: neighbours k..k+margin lie within the bf16 error bound of each other, so with a
    # small margin many rows cannot be proved from their candidates and go through the rescue pass.
    rng = np.random.default_rng(1)
    src, tgt = clustered(rng, 300, 64, 6, 0.05), clustered(rng, 257, 64, 6, 0.05)
    res = knn_both_ways_lowp(src, tgt, 5, margin=margin, tile=(37, 61), workers=workers, compute=compute)
    assert_same(res, knn_both_ways(src, tgt, 5), src, tgt)
    if margin <= 1:
        assert res.info.rescued > 0


@LOWP
def test_lowp_rescue_falls_back_to_exact_tiles_past_its_cap(monkeypatch: pytest.MonkeyPatch, compute: Compute) -> None:
    monkeypatch.setattr(lowp_module, "_RESCUE_CAP", 1)
    monkeypatch.setattr(lowp_module, "_RESCUE_TILE", 50)
    rng = np.random.default_rng(2)
    src, tgt = clustered(rng, 120, 16, 3, 0.05), clustered(rng, 140, 16, 3, 0.05)
    res = knn_both_ways_lowp(src, tgt, 3, margin=0, tile=(17, 19), compute=compute)
    assert res.info.rescued > 0
    assert_same(res, knn_both_ways(src, tgt, 3), src, tgt)


@LOWP
def test_lowp_with_exact_ties_and_k_larger_than_a_tile(compute: Compute) -> None:
    rng = np.random.default_rng(3)
    base = unit(rng, 20, 24)
    # Every target row appears three times: similarities tie exactly in threes.
    tgt = np.repeat(base, 3, axis=0)
    src = clustered(rng, 50, 24, 4, 0.3)
    res = knn_both_ways_lowp(src, tgt, 12, margin=2, tile=(5, 7), compute=compute)
    ref = knn_both_ways(src, tgt, 12)
    assert_same(res, ref, src, tgt)
    # The tied groups are whole: the k best similarities are the fp32 ones, duplicates included.
    np.testing.assert_allclose(res.fwd_sims, ref.fwd_sims, rtol=0, atol=1e-6)


@LOWP
def test_lowp_takes_float16_inputs_and_clips_k(compute: Compute) -> None:
    rng = np.random.default_rng(4)
    src, tgt = unit(rng, 30, 16).astype(np.float16), unit(rng, 6, 16).astype(np.float16)
    res = knn_both_ways_lowp(src, tgt, 9, tile=(4, 4), compute=compute)
    ref = knn_both_ways(src.astype(np.float32), tgt.astype(np.float32), 9)
    assert res.fwd_ids.shape == (30, 6) and res.bwd_ids.shape == (6, 9)
    assert_same(res, ref, src.astype(np.float32), tgt.astype(np.float32))
    assert sorted(res.fwd_ids[0].tolist()) == [0, 1, 2, 3, 4, 5]


@LOWP
def test_lowp_does_not_mutate_inputs_and_reports_progress(compute: Compute) -> None:
    rng = np.random.default_rng(5)
    src, tgt = unit(rng, 10, 8), unit(rng, 11, 8)
    before = (src.copy(), tgt.copy())
    seen: list[tuple[int, int]] = []
    knn_both_ways_lowp(src, tgt, 2, tile=(4, 3), workers=1, progress=lambda d, t: seen.append((d, t)), compute=compute)
    np.testing.assert_array_equal(src, before[0])
    np.testing.assert_array_equal(tgt, before[1])
    assert seen == [(4, 10), (8, 10), (10, 10)]


@LOWP
def test_lowp_rejects_bad_input_and_handles_empty_sides(compute: Compute) -> None:
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="dimension mismatch"):
        knn_both_ways_lowp(unit(rng, 3, 4), unit(rng, 3, 5), 1, compute=compute)
    with pytest.raises(ValueError, match="k must be"):
        knn_both_ways_lowp(unit(rng, 3, 4), unit(rng, 3, 4), 0, compute=compute)
    with pytest.raises(ValueError, match="margin"):
        knn_both_ways_lowp(unit(rng, 3, 4), unit(rng, 3, 4), 1, margin=-1, compute=compute)
    with pytest.raises(ValueError, match="2-d"):
        knn_both_ways_lowp(np.zeros(4, dtype=np.float32), unit(rng, 3, 4), 1, compute=compute)
    res = knn_both_ways_lowp(np.zeros((0, 4), dtype=np.float32), unit(rng, 3, 4), 2, compute=compute)
    assert res.fwd_ids.shape == (0, 2) and res.bwd_ids.shape == (3, 0)


def test_knn_both_picks_int8_or_bf16_where_supported_and_fp32_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    src, tgt = unit(rng, 20, 8), unit(rng, 15, 8)
    monkeypatch.setattr(hw, "cuda_available", lambda: False)  # a visible GPU would take the device pass
    monkeypatch.setattr(hw, "_int8_supported", lambda: False)
    monkeypatch.setattr(hw, "_bf16_supported", lambda: False)
    fp32 = knn_both(src, tgt, 3, method=KnnMethod.EXACT)
    assert fp32.info.compute is Compute.FP32 and fp32.info.as_dict()["compute"] == "fp32"
    monkeypatch.setattr(hw, "_bf16_supported", lambda: True)
    bf16 = knn_both(src, tgt, 3, method=KnnMethod.EXACT)
    assert bf16.info.as_dict() == {"compute": "bf16", "device": "cpu", "candidates": 11, "rescued": 0}
    assert_same(bf16, fp32, src, tgt)
    monkeypatch.setattr(hw, "_int8_supported", lambda: True)
    int8 = knn_both(src, tgt, 3, method=KnnMethod.EXACT)
    assert int8.info.as_dict() == {"compute": "int8", "device": "cpu", "candidates": 27, "rescued": 0}
    assert_same(int8, fp32, src, tgt)
    forced = knn_both(src, tgt, 3, method=KnnMethod.EXACT, compute=Compute.FP32)
    assert forced.info.compute is Compute.FP32


def test_bf16_detection_reads_cpu_flags_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    hw.clear_cache()
    try:
        monkeypatch.delenv("PCAPP_BF16", raising=False)
        monkeypatch.setattr(hw.platform, "machine", lambda: "x86_64")
        monkeypatch.setattr(hw, "cpu_flags", lambda: frozenset({"avx2", "avx512f"}))
        assert hw.bf16_supported() is False and hw.cpu_compute() is Compute.FP32
        hw.clear_cache()
        monkeypatch.setattr(hw, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
        assert hw.bf16_supported() is True
        hw.clear_cache()
        monkeypatch.setenv("PCAPP_BF16", "0")
        assert hw.bf16_supported() is False
        hw.clear_cache()
        monkeypatch.setenv("PCAPP_BF16", "yes")
        with pytest.raises(ValueError, match="PCAPP_BF16"):
            hw.bf16_supported()
    finally:
        hw.clear_cache()


@pytest.mark.parametrize(
    ("flags", "env", "int8", "knn"),
    [
        ({"avx2"}, "", False, Compute.FP32),
        ({"avx512f", "avx512_bf16"}, "", False, Compute.BF16),
        ({"avx512f", "avx512_vnni", "avx512_bf16"}, "", True, Compute.INT8),  # Zen 4: int8 ran 2x bf16
        ({"avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8"}, "", False, Compute.BF16),  # AMX: bf16 is faster
        ({"avx_vnni"}, "", True, Compute.INT8),
        ({"avx512f", "avx512_vnni", "avx512_bf16"}, "0", False, Compute.BF16),
        ({"avx2"}, "1", True, Compute.INT8),
    ],
)
def test_int8_detection_reads_cpu_flags_and_env(
    monkeypatch: pytest.MonkeyPatch, flags: set[str], env: str, int8: bool, knn: Compute
) -> None:
    hw.clear_cache()
    try:
        monkeypatch.delenv("PCAPP_BF16", raising=False)
        monkeypatch.setenv("PCAPP_INT8", env)
        monkeypatch.setattr(hw.platform, "machine", lambda: "x86_64")
        monkeypatch.setattr(hw, "cpu_flags", lambda: frozenset(flags))
        assert hw.int8_supported() is int8 and hw.knn_compute() is knn
        assert hw.cpu_compute() is (Compute.BF16 if "avx512_bf16" in flags else Compute.FP32)  # encoders: no int8
    finally:
        hw.clear_cache()


def test_encoders_refuse_int8() -> None:
    with pytest.raises(ValueError, match="'bf16' or 'fp32'"):
        hw.resolve_compute("int8")
    assert hw.resolve_compute("bf16") is Compute.BF16


@pytest.mark.parametrize("tile", [(1, 1), (7, 13), (64, 5), (3, 1000)])
@pytest.mark.parametrize("k", [1, 4, 20])
@LOWP
def test_one_direction_lowp_matches_fp32_flat_search(tile: tuple[int, int], k: int, compute: Compute) -> None:
    rng = np.random.default_rng(10)
    q, b = unit(rng, 53, 32), unit(rng, 71, 32)
    sims, ids = knn_exact_lowp(q, b, k, tile=tile, compute=compute)  # k = 20 is larger than most of these tiles
    assert_same_one_way(sims, ids, *knn_exact(q, b, k), q, b)


@pytest.mark.parametrize(("margin", "workers"), [(0, 1), (2, 2), (8, 1)])
@LOWP
def test_one_direction_lowp_on_clustered_data_rescues_and_stays_exact(
    margin: int, workers: int, compute: Compute
) -> None:
    rng = np.random.default_rng(11)
    q, b = clustered(rng, 210, 48, 5, 0.05), clustered(rng, 333, 48, 5, 0.05)
    sims, ids = knn_exact_lowp(q, b, 6, margin=margin, tile=(29, 41), workers=workers, compute=compute)
    assert_same_one_way(sims, ids, *knn_exact(q, b, 6), q, b)


@LOWP
def test_one_direction_lowp_with_ties_float16_inputs_and_a_small_base(compute: Compute) -> None:
    rng = np.random.default_rng(12)
    b = np.repeat(unit(rng, 9, 16), 4, axis=0).astype(np.float16)  # every similarity tied in fours
    q = clustered(rng, 40, 16, 3, 0.3).astype(np.float16)
    sims, ids = knn_exact_lowp(q, b, 10, margin=1, tile=(6, 5), compute=compute)
    assert_same_one_way(sims, ids, *knn_exact(q.astype(np.float32), b.astype(np.float32), 10), q, b)
    sims, ids = knn_exact_lowp(q, b[:3], 10, compute=compute)
    assert ids.shape == (40, 3) and sorted(ids[0].tolist()) == [0, 1, 2]
    sims, ids = knn_exact_lowp(q[:0], b, 2, compute=compute)
    assert sims.shape == (0, 2)


def test_knn_search_uses_low_precision_where_supported_and_falls_back_to_fp32(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(13)
    q, b = unit(rng, 30, 8), unit(rng, 25, 8)
    calls: list[str] = []

    def lowp(*a, **kw):  # type: ignore[no-untyped-def]
        calls.append(kw["compute"].value)
        return knn_exact_lowp(*a, compute=kw["compute"])

    monkeypatch.setattr(route, "knn_exact_lowp", lowp)
    monkeypatch.setattr(route, "knn_exact", lambda *a, **kw: calls.append("fp32") or knn_exact(*a, **kw))
    monkeypatch.setattr(hw, "cuda_available", lambda: False)  # a visible GPU would take the device pass
    monkeypatch.setattr(hw, "_int8_supported", lambda: False)
    monkeypatch.setattr(hw, "_bf16_supported", lambda: False)
    fp32 = knn_search(q, b, 3, method=KnnMethod.EXACT, batch_size=7)
    monkeypatch.setattr(hw, "_bf16_supported", lambda: True)
    bf16 = knn_search(q, b, 3, method=KnnMethod.EXACT, batch_size=7)  # batch_size is the fp32 path's knob
    monkeypatch.setattr(hw, "_int8_supported", lambda: True)
    int8 = knn_search(q, b, 3, method=KnnMethod.EXACT)
    forced = knn_search(q, b, 3, method=KnnMethod.EXACT, compute=Compute.FP32)
    assert calls == ["fp32", "bf16", "int8", "fp32"]
    assert_same_one_way(*bf16, *fp32, q, b)
    assert_same_one_way(*int8, *fp32, q, b)
    np.testing.assert_array_equal(forced[1], fp32[1])


@pytest.mark.parametrize("compute", [Compute.BF16, Compute.INT8, Compute.FP32])
def test_shard_searched_both_ways_equals_the_two_one_way_searches(compute: Compute) -> None:
    rng = np.random.default_rng(14)
    q, b = clustered(rng, 90, 24, 4, 0.2), clustered(rng, 70, 24, 4, 0.2)
    (f_sims, f_ids), (b_sims, b_ids) = search_exact_shard_both(q, b, 5, 1000, 500, compute=compute)
    assert_same_one_way(f_sims, f_ids - 500, *search_exact_shard(q, b, 5, 0, compute=Compute.FP32), q, b)
    assert_same_one_way(b_sims, b_ids - 1000, *search_exact_shard(b, q, 5, 0, compute=Compute.FP32), b, q)
    assert f_ids.min() >= 500 and b_ids.min() >= 1000


def test_int8_levels_keep_tile_values_exact_in_float32() -> None:
    for d in (1, 8, 512, 1040, 1041, 2048, 4096):
        q = lowp_module.int8_levels(d)
        assert 1 <= q <= 127 and d * q * q < 2**24
    assert lowp_module.int8_levels(512) == 127 and lowp_module.int8_levels(2048) == 90


def test_int8_at_a_wide_dimension_matches_fp32() -> None:
    rng = np.random.default_rng(21)
    src, tgt = clustered(rng, 60, 2048, 3, 0.5), clustered(rng, 50, 2048, 3, 0.5)
    res = knn_both_ways_lowp(src, tgt, 3, compute=Compute.INT8, tile=(16, 16))
    assert_same(res, knn_both_ways(src, tgt, 3), src, tgt)


@LOWP
def test_lowp_with_rows_of_very_different_norms_and_a_zero_row(compute: Compute) -> None:
    # One scale per int8 side: the long rows set it, so the short rows are rounded coarsely and must be rescued.
    rng = np.random.default_rng(22)
    src = clustered(rng, 80, 32, 4, 0.3) * rng.uniform(0.01, 10.0, (80, 1)).astype(np.float32)
    tgt = clustered(rng, 70, 32, 4, 0.3) * rng.uniform(0.01, 10.0, (70, 1)).astype(np.float32)
    src[5] = 0.0
    res = knn_both_ways_lowp(src, tgt, 4, compute=compute, tile=(13, 11))
    assert_same(res, knn_both_ways(src, tgt, 4), src, tgt)
    sims, ids = knn_exact_lowp(src, tgt, 4, compute=compute, tile=(13, 11))
    assert_same_one_way(sims, ids, *knn_exact(src, tgt, 4), src, tgt)
