"""Batch language identification with py3langid's model (shipped inside the package), vectorised across texts.

py3langid walks a byte-level DFA per text in a Python loop (about 10k sentences/s here). This walks the same DFA
for a whole batch at once, one numpy step per byte position, then scores all texts with one sparse-dense product;
the result equals `py3langid.classify(text)[0]` (checked by the tests). Texts are cut to their first `max_bytes`
bytes, which is plenty to tell a language and bounds the cost of long documents.

Scores are float32 like py3langid's own (its model stores the table in float16 and scores in float32): a float64
table was twice the memory traffic of the sparse product, the largest cost here, for no change of any label.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

MAX_BYTES = 512
CHUNK = 4096


@lru_cache(maxsize=1)
def _model() -> tuple:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    ident = LanguageIdentifier.from_model_file(MODEL_FILE)
    # int32 holds every state and feature number (< 2**24) and halves the size of the random gathers.
    nm = np.asarray(ident.tk_nextmove, dtype=np.int32)
    rowbase = np.asarray(ident._rowbase, dtype=np.int32)
    out = np.asarray(ident.tk_output, dtype=np.int32)
    ptc = np.asarray(ident.nb_ptc, dtype=np.float32)
    pc = np.asarray(ident.nb_pc, dtype=np.float32)
    return nm, rowbase, out, ptc, pc, list(ident.nb_classes), list(ident._alias_pairs)


def _encode(text: str, max_bytes: int) -> bytes:
    if text.isupper():
        text = text.lower()
    return unicodedata.normalize("NFC", text).encode("utf8", errors="surrogatepass")[:max_bytes]


def detect(texts: Sequence[str], *, max_bytes: int = MAX_BYTES) -> list[str]:
    """The ISO 639-1 code py3langid gives each text; '' for texts without any n-gram feature the model knows
    (where py3langid itself falls back to its first class, 'af')."""
    return detect_with_probability(texts, max_bytes=max_bytes)[0]


def detect_with_probability(texts: Sequence[str], *, max_bytes: int = MAX_BYTES) -> tuple[list[str], np.ndarray]:
    """Each text's language code (as ``detect``) and the model's probability for it.

    The probability is py3langid's normalised one (its ``norm_probs``: the naive-Bayes scores divided by the square
    root of the text's length in bytes, put through a softmax over its languages). Naive Bayes is overconfident on
    short text, so a high probability alone does not make a verdict safe: ``mining.core.filters`` also asks for
    enough text to judge.

    Returns:
        (n codes, '' where nothing could be told; (n,) float64 probabilities, 0.0 where the code is '').
    """
    nm, rowbase, out, ptc, pc, classes, aliases = _model()
    encoded = [_encode(t, max_bytes) for t in texts]
    lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=len(encoded))
    order = np.argsort(lengths, kind="stable")
    result = np.empty(len(encoded), dtype=object)
    probs = np.zeros(len(encoded), dtype=np.float64)
    for start in range(0, len(order), CHUNK):
        idx = order[start : start + CHUNK]
        result[idx], probs[idx] = _detect_chunk(
            [encoded[i] for i in idx], lengths[idx], nm, rowbase, out, ptc, pc, classes, aliases
        )
    codes = ["" if not t.strip() else code for t, code in zip(texts, result.tolist(), strict=True)]
    probs[np.array([not c for c in codes], dtype=bool)] = 0.0
    return codes, probs


def _detect_chunk(
    chunk: list[bytes], lengths: np.ndarray, nm, rowbase, out, ptc, pc, classes, aliases
) -> tuple[list[str], np.ndarray]:
    n, width = len(chunk), int(lengths.max(initial=0))
    if width == 0:
        return [""] * n, np.zeros(n)
    # Byte j of every text is one contiguous row of `buf`, so each step of the walk reads and writes in order.
    buf = np.zeros((width, n), dtype=np.int32)
    flat = np.frombuffer(b"".join(chunk), dtype=np.uint8)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    buf[cols, rows] = flat
    state = np.zeros(n, dtype=np.int32)
    hit_rows, hit_feats = [], []
    # Chunks are sorted by length: at step j the texts below ended[j] have ended.
    ended = np.searchsorted(lengths, np.arange(width), side="right")
    for j in range(width):
        first = ended[j]
        s = nm[rowbase[state[first:]] + buf[j, first:]]
        state[first:] = s
        f = out[s]
        keep = np.flatnonzero(f >= 0)
        if keep.size:
            hit_rows.append(keep + first)
            hit_feats.append(f[keep])
    scores = np.tile(pc, (n, 1))
    featureless = np.ones(n, dtype=bool)
    if hit_rows:
        r, f = np.concatenate(hit_rows), np.concatenate(hit_feats)
        # Column-major, the product reads each feature's row of the table once per chunk.
        counts = sp.coo_matrix((np.ones(len(r), dtype=np.float32), (r, f)), shape=(n, ptc.shape[0])).tocsc()
        counts.sum_duplicates()
        counts.data = np.log1p(counts.data)
        scores += counts @ ptc
        featureless[r] = False
    # py3langid's norm_probs: the scores divided by T = sqrt(bytes) (which keeps the softmax calibrated across
    # lengths), a softmax, and aliased classes summed into the first of each pair.
    scaled = scores.astype(np.float64) / np.sqrt(np.maximum(lengths, 1))[:, None]
    probs = np.exp(scaled - scaled.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    floor = scores.min() - 1.0
    for i, j in aliases:
        scores[:, i] = np.maximum(scores[:, i], scores[:, j])
        scores[:, j] = floor
        probs[:, i] += probs[:, j]
        probs[:, j] = 0.0
    best = scores.argmax(axis=1)
    prob = probs[np.arange(n), best]
    # No feature at all (digits, symbols, a two-letter word): no language can be told.
    codes = ["" if none else classes[k] for k, none in zip(best, featureless, strict=True)]
    return codes, np.where(featureless, 0.0, prob)
