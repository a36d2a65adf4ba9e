"""What arithmetic the machine does fast: bfloat16 matrix units on the CPU, and a CUDA device if one is visible.

``bf16_supported()`` is True when the CPU has bfloat16 dot-product or matrix instructions (``avx512_bf16`` or
``amx_bf16`` among the kernel's CPU flags, or oneDNN reporting bf16 support on a non-x86 CPU) so that torch's bf16
matrix products run several times faster than fp32 ones (3.7x measured here at 1 and 2 threads). Each answer is
computed once per process; ``PCAPP_BF16=0`` / ``=1`` overrides the detection (for benchmarks and operators).
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


class Compute(enum.Enum):
    """Which arithmetic a compute path ran in (named in a run's stats)."""

    FP32 = "fp32"
    BF16 = "bf16"


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
    forced = os.environ.get("PCAPP_BF16", "").strip()
    if forced in {"0", "1"}:
        return forced == "1"
    if forced:
        raise ValueError(f"PCAPP_BF16 must be 0 or 1, got {forced!r}")
    if platform.machine().lower() in {"x86_64", "amd64", "i386", "i686"}:
        # On x86 oneDNN also "supports" bf16 through AVX-512 emulation, which is slower than fp32:
        # only the native instructions count.
        found = bool(cpu_flags() & BF16_CPU_FLAGS)
    else:
        import torch

        found = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    logger.info("bf16 matrix units %s", "found" if found else "not found")
    return found


def cpu_compute() -> Compute:
    """BF16 where the CPU has bf16 units, else FP32."""
    return Compute.BF16 if bf16_supported() else Compute.FP32


def resolve_compute(compute: Compute | str | None) -> Compute:
    """The CPU arithmetic asked for: a Compute, its value ("bf16", "fp32"), or None / "auto" (``cpu_compute()``)."""
    if compute is None or compute == "auto":
        return cpu_compute()
    if isinstance(compute, Compute):
        return compute
    try:
        return Compute(compute)
    except ValueError:
        raise ValueError(f"compute must be 'auto', 'bf16' or 'fp32', got {compute!r}") from None


def cuda_available() -> bool:
    """Whether torch sees a CUDA device (``PCAPP_DEVICE=cpu`` hides it)."""
    if os.environ.get("PCAPP_DEVICE", "").strip().lower() == "cpu":
        return False
    import torch

    return bool(torch.cuda.is_available())


def default_device() -> Device:
    """CUDA when a GPU is visible, else the CPU."""
    return Device.CUDA if cuda_available() else Device.CPU


def clear_cache() -> None:
    """Forget the cached answers (tests that change the environment)."""
    _cpu_flags.cache_clear()
    _bf16_supported.cache_clear()
