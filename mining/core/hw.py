"""What arithmetic the machine does fast: bfloat16 and int8 dot-product units on the CPU, and a CUDA device if one is
visible.

``bf16_supported()`` is True when the CPU has bfloat16 dot-product or matrix instructions (``avx512_bf16`` or
``amx_bf16`` among the kernel's CPU flags, or oneDNN reporting bf16 support on a non-x86 CPU) so that torch's bf16
matrix products run several times faster than fp32 ones (3.7x measured here at 1 and 2 threads). Each answer is
computed once per process; ``PCAPP_BF16=0`` / ``=1`` overrides the detection (for benchmarks and operators).

``int8_supported()`` is True when the CPU has int8 dot-product instructions (``avx512_vnni`` / ``avx_vnni``) and no
AMX bf16 tiles: there ``torch._int_mm`` ran at 4.7x the fp32 rate and 2x bf16 (a Zen 4 with ``avx512_bf16``, 1
thread), while with AMX bf16 was reported at 2x int8. Exact kNN then takes int8 tiles (``knn_compute()``);
``PCAPP_INT8=0`` / ``=1`` overrides. Encoders never use int8 (their outputs must stay the model's).
"""

from __future__ import annotations

import enum
import functools
import logging
import os
import platform

logger = logging.getLogger(__name__)

# CPU flags (as /proc/cpuinfo spells them) that make oneDNN's bf16 GEMM faster than fp32.
BF16_CPU_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# CPU flags of int8 dot-product instructions (VNNI), which make torch's int8 products several times the fp32 rate.
INT8_CPU_FLAGS = frozenset({"avx512_vnni", "avx_vnni"})


class Compute(enum.Enum):
    """Which arithmetic a compute path ran in (named in a run's stats)."""

    FP32 = "fp32"
    BF16 = "bf16"
    INT8 = "int8"  # exact kNN's candidate tiles only, always re-scored exactly


class Device(enum.Enum):
    """Where a torch compute path runs."""

    CPU = "cpu"
    CUDA = "cuda"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where that file does not exist)."""
    return _cpu_flags()


@functools.cache
def _cpu_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def bf16_supported() -> bool:
    """Whether bf16 matrix products are fast here (cached; ``PCAPP_BF16`` overrides)."""
    return _bf16_supported()


@functools.cache
def _bf16_supported() -> bool:
    forced = _forced("PCAPP_BF16")
    if forced is not None:
        return forced
    if platform.machine().lower() in {"x86_64", "amd64", "i386", "i686"}:
        # On x86 oneDNN also "supports" bf16 through AVX-512 emulation, which is slower than fp32:
        # only the native instructions count.
        found = bool(cpu_flags() & BF16_CPU_FLAGS)
    else:
        import torch

        found = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    logger.info("bf16 matrix units %s", "found" if found else "not found")
    return found


def _forced(var: str) -> bool | None:
    """An environment override 0 / 1 as a bool, None when unset."""
    forced = os.environ.get(var, "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    if forced:
        raise ValueError(f"{var} must be 0 or 1, got {forced!r}")
    return None


def int8_supported() -> bool:
    """Whether int8 products beat bf16 ones here: VNNI without AMX bf16 (cached; ``PCAPP_INT8`` overrides)."""
    return _int8_supported()


@functools.cache
def _int8_supported() -> bool:
    forced = _forced("PCAPP_INT8")
    if forced is not None:
        return forced
    flags = cpu_flags()
    found = bool(flags & INT8_CPU_FLAGS) and "amx_bf16" not in flags
    logger.info("int8 dot-product units %s", "found" if found else "not found (or AMX bf16 is faster)")
    return found


def cpu_compute() -> Compute:
    """BF16 where the CPU has bf16 units, else FP32 (the encoders' arithmetic)."""
    return Compute.BF16 if bf16_supported() else Compute.FP32


def knn_compute() -> Compute:
    """The arithmetic of exact kNN's similarity tiles: INT8 where int8 units beat bf16 ones, else ``cpu_compute()``.
    Both low-precision paths re-score their candidates exactly and prove the fp32 neighbours."""
    return Compute.INT8 if int8_supported() else cpu_compute()


def resolve_compute(compute: Compute | str | None) -> Compute:
    """An encoder's CPU arithmetic: a Compute, its value ("bf16", "fp32"), or None / "auto" (``cpu_compute()``)."""
    if compute is None or compute == "auto":
        return cpu_compute()
    message = f"compute must be 'auto', 'bf16' or 'fp32', got {compute!r}"
    try:
        resolved = Compute(compute)
    except ValueError:
        raise ValueError(message) from None
    if resolved is Compute.INT8:
        raise ValueError(message)
    return resolved


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (``PCAPP_DEVICE=cpu`` hides it)."""
    if os.environ.get("PCAPP_DEVICE", "").strip().lower() == "cpu":
        return False
    import torch

    return bool(torch.cuda.is_available())


def default_device() -> Device:
    """CUDA when a GPU is visible, else the CPU."""
    return Device.CUDA if cuda_available() else Device.CPU


def knn_path() -> tuple[Compute, Device]:
    """Where and in which arithmetic exact kNN computes its tiles: bf16 on a visible GPU, else ``knn_compute()`` on
    the CPU."""
    if cuda_available():
        return Compute.BF16, Device.CUDA
    return knn_compute(), Device.CPU


def clear_cache() -> None:
    """Forget the cached answers (tests that change the environment)."""
    _cpu_flags.cache_clear()
    _bf16_supported.cache_clear()
    _int8_supported.cache_clear()
