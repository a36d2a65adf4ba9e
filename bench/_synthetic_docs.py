"""Synthetic parallel documents for bench/document_speed.py: 512-d unit sentence embeddings around topic centres,
each target document a noisy, locally shuffled copy of its source (see `make_docs`)."""

from __future__ import annotations

import numpy as np


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_docs(
    n_docs: int,
    sents: int,
    d: int,
    seed: int,
    pair_noise: float = 0.75,
    *,
    drop: float = 0.1,
    insert: float = 0.1,
    shuffle: float = 1.5,
    spread: float = 2.0,
    docs_per_topic: int = 10,
    permute: bool = True,
    topics: tuple[int, int] | None = None,
    block: int = 65536,
) -> dict[str, np.ndarray]:
    """Synthetic parallel documents: source document i <-> target document truth[i].

    Source sentences: a topic centre (one per ~docs_per_topic documents) + spread * g / sqrt(d), normalised
    (cos to the centre ~0.45, so documents of one topic compete). Target document truth[i]: each source sentence
    kept with probability 1 - drop as x + pair_noise * g / sqrt(d), normalised; about insert * n unrelated
    sentences of the same topic added; order perturbed by a uniform(+-shuffle) jitter of the position.
    Returns flat (rows, d) float32 embeddings with (n_docs + 1,) offsets and per-row positions for both sides,
    truth (n_docs,), and origin (target rows,): the source row each target row copies, -1 for inserted ones.
    With permute False, truth is the identity (pair i is documents (i, i)). topics: (count, seed) of the topic
    centres, to draw other documents of the same domain (default: n_docs // docs_per_topic centres from `seed`).
    """
    rng = np.random.default_rng(seed)
    n_topics, topic_seed = topics or (max(1, n_docs // docs_per_topic), seed)
    centres = _unit(np.random.default_rng(topic_seed).standard_normal((n_topics, d), dtype=np.float32))
    topic = rng.integers(0, len(centres), n_docs)
    noise = np.float32(spread / np.sqrt(d))

    def topical(docs: np.ndarray) -> np.ndarray:
        out = np.empty((len(docs), d), dtype=np.float32)
        for i0 in range(0, len(docs), block):
            part = docs[i0 : i0 + block]
            out[i0 : i0 + block] = _unit(centres[topic[part]] + rng.standard_normal((len(part), d), np.float32) * noise)
        return out

    n_src = n_docs * sents
    src_doc = np.repeat(np.arange(n_docs), sents)
    s_emb = topical(src_doc)
    kept = np.flatnonzero(rng.random(n_src) >= drop)
    n_ins = int(rng.binomial(n_src, insert))
    ins_doc = rng.integers(0, n_docs, n_ins)
    truth = rng.permutation(n_docs) if permute else np.arange(n_docs)
    origin = np.concatenate([kept, np.full(n_ins, -1)])
    label = truth[np.concatenate([src_doc[kept], ins_doc])]
    key = np.concatenate([kept % sents + rng.uniform(-shuffle, shuffle, len(kept)), rng.uniform(0, sents, n_ins)])
    order = np.lexsort((key, label))
    origin, label = origin[order], label[order]
    t_emb = np.empty((len(order), d), dtype=np.float32)
    inverse = np.argsort(truth)  # target document -> its source document (for inserted sentences' topic)
    copy_noise = np.float32(pair_noise / np.sqrt(d))
    for i0 in range(0, len(order), block):
        o = origin[i0 : i0 + block]
        part = np.empty((len(o), d), dtype=np.float32)
        copy = o >= 0
        part[copy] = s_emb[o[copy]] + rng.standard_normal((int(copy.sum()), d), np.float32) * copy_noise
        part[~copy] = topical(inverse[label[i0 : i0 + block][~copy]])
        t_emb[i0 : i0 + block] = _unit(part)
    t_off = np.concatenate([[0], np.cumsum(np.bincount(label, minlength=n_docs))]).astype(np.int64)
    s_off = np.arange(0, n_src + 1, sents, dtype=np.int64)
    return {
        "s_emb": s_emb,
        "s_off": s_off,
        "s_pos": np.tile(np.arange(sents), n_docs).astype(np.int64),
        "t_emb": t_emb,
        "t_off": t_off,
        "t_pos": (np.arange(len(label)) - t_off[label]).astype(np.int64),
        "truth": truth.astype(np.int64),
        "origin": origin.astype(np.int64),
    }


# --- subprocess side -------------------------------------------------------------------------------------------
