"""Linux /proc readings the benchmarks share: resident memory and its kernel peak mark."""

from __future__ import annotations


def status_kb(name: str) -> int:
    """A kB field of /proc/self/status (VmRSS, VmHWM, ...); 0 where absent."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM); False where not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
