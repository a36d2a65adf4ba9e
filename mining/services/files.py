"""Writing files safely: a temp file that a failed write (disk full, read-only folder, a crash of the writer's code)
does not leave behind."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def removed_on_error(tmp: Path) -> Iterator[Path]:
    """Yield `tmp`; when the block raises, remove `tmp` (whatever part of it was written) and re-raise."""
    try:
        yield tmp
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
