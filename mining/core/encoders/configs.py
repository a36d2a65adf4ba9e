"""The encoders' training configurations, in a module that imports no torch: the run parameters and the services
that check them read these without loading a model library. ``dan`` and ``adapter`` re-export them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from mining.core.encoders.base import check_domain_weight
from mining.core.encoders.tokenize import FeatureHasher


@dataclass(frozen=True)
class DanConfig:
    """Architecture and training hyper-parameters of the DAN dual encoder.

    Attributes:
        n_buckets: hashed feature rows per tower (unigrams and bigrams share them).
        emb_dim: feature embedding width.
        hidden: widths of the residual feed-forward layers (ReLU on all but the last).
        out_dim: sentence embedding width.
        init_std: standard deviation of the feature embeddings at initialisation.
        batch_size: pairs per step (K); every other pair of the batch is an in-batch negative.
        lr: Adam learning rate of the dense layers.
        emb_lr: SparseAdam learning rate of the feature embeddings.
        epochs: epochs of the first stage (in-batch random negatives).
        hard_epochs: epochs of the second stage (with hard negatives).
        hard_negatives: M, hard negatives mined per source for the second stage.
        margin: additive margin m of the softmax.
        scale: multiplies the cosine scores before the softmax (a temperature).
        mining_batch_size: queries per kNN call when mining hard negatives.
        checkpoint_every: also checkpoint every this many steps (0: only at epoch ends).
        bigrams: hash word bigrams besides unigrams (False: a bag of unigrams, as Document BoW uses).
        domain_weight: with ``train_dan(domain=...)``, how many times each in-domain pair is seen per epoch.
        char_ngrams: lengths of the character n-grams each word adds to its features (fastText's subwords, e.g.
            (3, 4, 5)); empty: words and bigrams only. Helps languages that compound and inflect (German).
    """

    n_buckets: int = 2**18
    emb_dim: int = 320
    hidden: tuple[int, ...] = (320, 320, 500, 500)
    out_dim: int = 512
    init_std: float = 0.1
    batch_size: int = 256
    lr: float = 1e-3
    emb_lr: float = 3e-2
    epochs: int = 3
    hard_epochs: int = 2
    hard_negatives: int = 5
    margin: float = 0.3
    scale: float = 20.0
    mining_batch_size: int = 4096
    checkpoint_every: int = 0
    bigrams: bool = True
    domain_weight: int = 1
    char_ngrams: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
        object.__setattr__(self, "char_ngrams", tuple(sorted({int(n) for n in self.char_ngrams})))
        if any(n < 2 for n in self.char_ngrams):
            raise ValueError(f"char_ngrams lengths must be >= 2, got {self.char_ngrams}")
        if self.n_buckets < 2 or self.emb_dim < 1 or self.out_dim < 1 or not self.hidden:
            raise ValueError(f"bad DAN architecture: {self}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be >= 2 (in-batch negatives)")
        if min(self.epochs, self.hard_epochs, self.hard_negatives, self.checkpoint_every) < 0:
            raise ValueError("epochs, hard_epochs, hard_negatives and checkpoint_every must be >= 0")
        check_domain_weight(self.domain_weight)

    def to_dict(self) -> dict[str, Any]:
        """Plain-type dict (for checkpoints)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DanConfig:
        """Inverse of ``to_dict``; unknown keys are an error (missing ones, from older checkpoints, get defaults)."""
        return cls(**data)

    def hasher(self) -> FeatureHasher:
        """The feature hasher this configuration's towers read."""
        return FeatureHasher(self.n_buckets, bigrams=self.bigrams, char_ngrams=self.char_ngrams)


@dataclass(frozen=True)
class AdapterConfig:
    """Adapter tower and training settings.

    `hidden`: the tower's widths; the last is the output dimension (>= the base's keeps the skip an isometry).
    `hard_negatives`: M near-misses per source, mined once with the base embeddings (0 = in-batch negatives only).
    `validation`: share of the pairs held out to pick the epoch (at most `max_validation` pairs).
    `domain_weight`: with `train_adapter(domain=...)`, how many times each in-domain pair is seen per epoch (a few
    thousand pairs of the user's own text beside tens of thousands of background pairs would otherwise be drowned).
    """

    hidden: tuple[int, ...] = (512, 512, 512)
    batch_size: int = 256
    lr: float = 3e-4
    margin: float = 0.3
    scale: float = 20.0
    epochs: int = 6
    hard_negatives: int = 5
    validation: float = 0.05
    max_validation: int = 2000
    domain_weight: int = 1

    def __post_init__(self) -> None:
        check_domain_weight(self.domain_weight)
