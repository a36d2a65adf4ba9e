"""additive_margin_softmax_loss against a per-row brute-force oracle, masks included."""

from __future__ import annotations

import math

import numpy as np
import torch

from mining.core.losses import additive_margin_softmax_loss


def _oracle(u, v, extra, margin, scale, exclude, extra_exclude, bidirectional=True):
    k = len(u)
    total = 0.0
    for i in range(k):
        cands = [(u[i] @ v[j] - (margin if j == i else 0.0)) * scale for j in range(k) if j == i or not exclude[i, j]]
        cands += [(u[i] @ e) * scale for m, e in enumerate(extra) if not extra_exclude[i, m]]
        total += math.log(sum(math.exp(c) for c in cands)) - (u[i] @ v[i] - margin) * scale
    forward = total / k
    if not bidirectional:
        return forward
    total = 0.0
    for j in range(k):
        cands = [(u[i] @ v[j] - (margin if i == j else 0.0)) * scale for i in range(k) if i == j or not exclude[i, j]]
        total += math.log(sum(math.exp(c) for c in cands)) - (u[j] @ v[j] - margin) * scale
    return forward + total / k


def test_loss_matches_oracle_with_masks_and_extra_negatives():
    rng = np.random.default_rng(0)
    u, v, extra = (rng.normal(size=(n, 4)) / 2 for n in (5, 5, 3))
    exclude = np.zeros((5, 5), dtype=bool)
    exclude[0, 3] = exclude[3, 0] = True
    exclude[2, 2] = True  # the diagonal is never dropped
    extra_exclude = np.zeros((5, 3), dtype=bool)
    extra_exclude[1, 2] = True
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    got = additive_margin_softmax_loss(
        t(u), t(v), 0.3, 5.0, True, t(extra), exclude=torch.tensor(exclude), extra_exclude=torch.tensor(extra_exclude)
    )
    np.testing.assert_allclose(got.item(), _oracle(u, v, extra, 0.3, 5.0, exclude, extra_exclude), rtol=1e-10)
    plain = additive_margin_softmax_loss(t(u), t(v), 0.3, 5.0, False)
    none_k, none_e = np.zeros((5, 5), dtype=bool), np.zeros((5, 0), dtype=bool)
    np.testing.assert_allclose(plain.item(), _oracle(u, v, [], 0.3, 5.0, none_k, none_e, False), rtol=1e-10)
