"""Language identification and normalised hashes of an import's texts, in worker processes (py3langid), so the
process that reads and COPYs does not wait on it."""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor

from .text import detect_languages, norm_hash

logger = logging.getLogger(__name__)

Analysis = tuple[list[str], list[int]]  # language code and norm_hash per text


class LanguageDetector:
    """py3langid over batches, in `workers` processes (inline when 0 or when processes cannot be started)."""

    def __init__(self, workers: int) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._workers = workers
        if workers > 0:
            try:
                self._pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
                # Start the workers and load the model (about a second) while the importer reads its first batch.
                for _ in range(workers):
                    self._pool.submit(_load_model)
            except (OSError, AssertionError, ValueError, RuntimeError) as exc:  # e.g. inside a daemonic process
                logger.info("language id runs inline (%s)", exc)
                self._pool = None

    def submit(
        self, texts: list[str], *, codes: list | None = None, hashes: list | None = None
    ) -> Callable[[], Analysis]:
        """Start detecting; returns a function that waits for the language codes and norm_hashes of the texts.
        `codes`: the texts' languages when they are known already (then only the hashes are computed, unless
        `hashes` has them too)."""
        if codes is not None:
            if hashes is not None:
                return lambda: (list(codes), list(hashes))
            return lambda: (list(codes), [norm_hash(t) for t in texts])
        if self._pool is None or len(texts) < 2000:
            return lambda: _analyse(texts)
        step = -(-len(texts) // self._workers)
        try:
            futures: list[Future] = [
                self._pool.submit(_analyse, texts[i : i + step]) for i in range(0, len(texts), step)
            ]
        except (RuntimeError, AssertionError) as exc:
            logger.info("language id runs inline (%s)", exc)
            self._pool = None
            return lambda: _analyse(texts)

        def result() -> Analysis:
            codes, hashes = [], []
            for future in futures:
                part_codes, part_hashes = future.result()
                codes += part_codes
                hashes += part_hashes
            return codes, hashes

        return result

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


def _analyse(texts: list[str]) -> Analysis:
    """Language code and normalised hash of each text (run in a worker, off the process that reads and COPYs)."""
    return detect_languages(texts), [norm_hash(t) for t in texts]


def _load_model() -> None:
    detect_languages([])
