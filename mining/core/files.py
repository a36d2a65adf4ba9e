"""The one atomic file writer: a file (or folder entry) is written under a temporary name beside its target and
renamed over it in one step, so a reader never sees half a file and a crash leaves the old one (or none)."""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in `path`'s folder (created if missing) to write to; on a clean exit it replaces `path`
    atomically (`os.replace`), on an error it is removed and `path` is left as it was.

    The temporary name is unique per host, process and call (several workers may write the same target), hidden
    (a leading dot) and ends with `suffix` (for writers that insist on an extension, such as `np.savez`)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}.tmp{suffix}")
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """`path`'s whole content, written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """`path`'s whole text (UTF-8), written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
