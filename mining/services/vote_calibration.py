"""Calibrated f1 for sentence-vote document matching (Guo et al. 2018, eq. 3 with section 2.4.2's confidence).

Once a calibration model exists for a language pair, each kNN hit (x, y) of the vote gets
f1 = conf(x, y) = the model's P(GOOD) from the source embedding u(x) and the pair score phi(x, y), the same score
the model was trained on (the margin of the labelled runs, recorded in the model's params as `phi`). Without a
usable model the vote keeps the normalised cosine (cos + 1) / 2, and the run records why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.knn import knn_exact
from ..core.margin import Margin, margin_score, neighbourhood_means
from ..models import Artefact, MiningRun
from .calibrators import DEFAULT_PHI, latest_calibration, load_calibrator

KnnFn = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class VoteCalibration:
    """The calibration a sentence-vote run uses for f1, or why it uses the normalised cosine (`model` None)."""

    artefact: Artefact | None
    model: Any | None
    margin: Margin = Margin(DEFAULT_PHI["margin"])
    k: int = DEFAULT_PHI["k"]
    note: str = ""

    @property
    def label(self) -> str:
        """What f1 is, for each document pair's evidence: the model's name and version, or 'cosine'."""
        return str(self.artefact) if self.model is not None else "cosine"

    def summary(self) -> dict[str, Any]:
        """The run's record of f1: the calibration version used, or the cosine and the reason."""
        if self.model is None:
            return {"f1": "cosine", "f1_note": self.note}
        a = self.artefact
        return {
            "f1": "calibrated",
            "calibration": {
                "id": a.pk,
                "name": a.name,
                "version": a.version,
                "method": a.params.get("method", ""),
                "phi": {"margin": self.margin.value, "k": self.k},
            },
        }

    def f1(
        self,
        s_emb: np.ndarray,
        t_emb: np.ndarray,
        sims: np.ndarray,
        ids: np.ndarray,
        *,
        knn: KnnFn = knn_exact,
        chunk: int = 4096,
    ) -> np.ndarray | None:
        """(n_src, N) float64 calibrated confidence of each kNN hit (0 where there is no neighbour); None: cosine.

        Args:
            s_emb, t_emb: (n_src, d), (n_tgt, d) float32 sentence embeddings, rows L2-normalised.
            sims, ids: (n_src, N) cosines (descending) and target indices of each source's neighbours (-1 none).
            knn: k-nearest-neighbour search (queries, base, k) -> (sims, ids), for the targets' neighbourhoods.
            chunk: sources per prediction batch (bounds the (chunk * N, d) copy of u).
        """
        if self.model is None:
            return None
        fwd = sims if sims.shape[1] >= self.k else knn(s_emb, t_emb, self.k)[0]
        fwd_mean = neighbourhood_means(fwd, self.k)
        bwd_mean = neighbourhood_means(knn(t_emb, s_emb, self.k)[0], self.k)
        valid = ids >= 0
        phi = margin_score(sims, fwd_mean[:, None], bwd_mean[np.where(valid, ids, 0)], self.margin)
        valid &= np.isfinite(phi)
        out = np.zeros(sims.shape, dtype=np.float64)
        n = sims.shape[1]
        for i0 in range(0, sims.shape[0], chunk):
            ok = valid[i0 : i0 + chunk]
            if not ok.any():
                continue
            u = np.repeat(s_emb[i0 : i0 + chunk], n, axis=0)[ok.ravel()]
            block = out[i0 : i0 + chunk]
            block[ok] = self.model.predict(u, phi[i0 : i0 + chunk][ok].astype(np.float64))
        return out


def vote_calibration(run: MiningRun) -> VoteCalibration:
    """The latest active calibration model of the run's language pair, when it fits the run's encoder.

    `params.calibrated_f1 = false` keeps the cosine (to compare the two)."""
    if run.params.get("calibrated_f1") is False:
        return VoteCalibration(None, None, note="calibrated f1 switched off (params.calibrated_f1)")
    artefact = latest_calibration(src_lang=run.src_lang, tgt_lang=run.tgt_lang)
    if artefact is None:
        return VoteCalibration(None, None, note=f"no calibration model for {run.src_lang}-{run.tgt_lang}")
    trained_with = artefact.params.get("encoder")
    if trained_with != run.encoder_id:
        return VoteCalibration(
            artefact,
            None,
            note=f"{artefact} was trained on the scores of encoder "
            f"{trained_with}, this run uses encoder {run.encoder_id}",
        )
    phi = {**DEFAULT_PHI, **artefact.params.get("phi", {})}
    return VoteCalibration(artefact, load_calibrator(artefact), Margin(phi["margin"]), int(phi["k"]))
