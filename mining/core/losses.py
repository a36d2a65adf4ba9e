"""Translation-ranking losses shared by the sentence encoders and the document models."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def additive_margin_softmax_loss(
    src: torch.Tensor,
    tgt: torch.Tensor,
    margin: float = 0.3,
    scale: float = 1.0,
    bidirectional: bool = True,
    extra_negatives: torch.Tensor | None = None,
    exclude: torch.Tensor | None = None,
    extra_exclude: torch.Tensor | None = None,
) -> torch.Tensor:
    """In-batch translation-ranking loss with an additive margin (Yang et al. 2019).

    Args:
        src: (K, d) float source embeddings; row i's positive is ``tgt[i]``.
        tgt: (K, d) float target embeddings.
        margin: subtracted from each positive's score before the softmax.
        scale: multiplies all scores (a temperature; 1.0 is the paper's plain dot product).
        bidirectional: add the target-to-source loss J(y -> x) to J(x -> y).
        extra_negatives: optional (M, d) targets appended to every source row's candidates
            (hard negatives); they only enter the x -> y direction.
        exclude: optional (K, K) bool; True at (i, j), i != j, drops pair (x_i, y_j) from the candidates
            of both directions (it is also a correct pair, e.g. a duplicate sentence in the batch).
            The diagonal is never dropped.
        extra_exclude: optional (K, M) bool; True drops ``extra_negatives[m]`` from row i's candidates.

    Returns:
        Scalar loss tensor (mean over the batch, summed over directions).
    """
    if src.shape != tgt.shape:
        raise ValueError(f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} differ in shape")
    k = src.shape[0]
    scores = src @ tgt.T
    eye = torch.eye(k, dtype=torch.bool, device=scores.device)
    scores = (scores - margin * eye.to(scores.dtype)) * scale
    if exclude is not None:
        if exclude.shape != (k, k):
            raise ValueError(f"exclude must be ({k}, {k}), got {tuple(exclude.shape)}")
        scores = scores.masked_fill(exclude & ~eye, float("-inf"))
    labels = torch.arange(k, device=scores.device)
    forward_scores = scores
    if extra_negatives is not None and extra_negatives.numel() > 0:
        extra = (src @ extra_negatives.T) * scale
        if extra_exclude is not None:
            if extra_exclude.shape != extra.shape:
                raise ValueError(f"extra_exclude must be {tuple(extra.shape)}, got {tuple(extra_exclude.shape)}")
            extra = extra.masked_fill(extra_exclude, float("-inf"))
        forward_scores = torch.cat([scores, extra], dim=1)
    loss = F.cross_entropy(forward_scores, labels)
    if bidirectional:
        loss = loss + F.cross_entropy(scores.T, labels)
    return loss
