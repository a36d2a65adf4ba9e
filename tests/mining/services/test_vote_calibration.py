"""Sentence-vote document runs use the language pair's latest calibration model as f1 (and record its version), and
fall back to the normalised cosine when there is none or it does not fit the run's encoder."""

from __future__ import annotations

import numpy as np
import pytest

from mining.core.calibration.baselines import PlattScaling
from mining.core.calibration.head import CalibrationHead, HeadConfig
from mining.core.knn import knn_exact
from mining.core.margin import Margin
from mining.models import Artefact, ArtefactKind, DocumentPairCandidate, JobStatus, RunKind, SentencePairCandidate
from mining.services.vote_calibration import VoteCalibration
from tests.factories.mining import docs_corpus, execute_run


@pytest.fixture
def corpus():
    """The imported en-fr documentation corpus (tests/data/import/admin-docs.jsonl)."""
    return docs_corpus()


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("margin", [Margin.RATIO, Margin.DISTANCE, Margin.ABSOLUTE])
def test_f1_is_the_model_on_each_hit_s_source_and_margin(margin):
    rng = np.random.default_rng(0)
    s_emb, t_emb = _unit(rng, 9, 6), _unit(rng, 7, 6)
    sims, ids = knn_exact(s_emb, t_emb, 3)
    ids[2, 2] = -1  # a missing neighbour
    sims[2, 2] = -np.inf
    u_train, phi_train = _unit(rng, 80, 6), rng.normal(1.0, 0.3, 80)
    labels = phi_train + 0.3 * u_train[:, 0] + rng.normal(0, 0.1, 80) > 1.0
    head = CalibrationHead(HeadConfig(val_fraction=0.0, max_epochs=20)).fit(u_train, phi_train, labels)
    vote = VoteCalibration(None, head, margin, k=2)
    f1 = vote.f1(s_emb, t_emb, sims, ids, chunk=4)  # odd chunks against the whole-array reference below
    # Reference: margin of each hit from brute-force neighbourhoods, then the head one pair at a time.
    cos = s_emb @ t_emb.T
    fwd = np.sort(cos, axis=1)[:, ::-1][:, :2].mean(1)
    bwd = np.sort(cos.T, axis=1)[:, ::-1][:, :2].mean(1)
    for i in range(9):
        for r in range(3):
            j = ids[i, r]
            if j < 0:
                assert f1[i, r] == 0.0
                continue
            phi = {
                Margin.RATIO: cos[i, j] / (fwd[i] / 2 + bwd[j] / 2),
                Margin.DISTANCE: cos[i, j] - (fwd[i] / 2 + bwd[j] / 2),
                Margin.ABSOLUTE: cos[i, j],
            }[margin]
            assert f1[i, r] == pytest.approx(float(head.predict(s_emb[i : i + 1], np.array([phi]))[0]), abs=1e-5)
    assert VoteCalibration(None, None, note="none").f1(s_emb, t_emb, sims, ids) is None


def _label_candidates(run, django_user_model) -> None:
    """Two reviewers judge every candidate: GOOD when both sentences come from documents with the same id."""
    from annotation.services import label_pair

    cands = SentencePairCandidate.objects.filter(run=run).select_related("src__document", "tgt__document")
    for k in range(2):
        who = django_user_model.objects.create_user(f"vote{k}", password="pw-vote-1234", is_staff=True)
        for c in cands:
            same = c.src.document.external_id == c.tgt.document.external_id
            label_pair(reviewer=who, sentence_pair_id=c.pk, verdict="GOOD" if same and c.rank % 4 else "BAD")


@pytest.mark.django_db
def test_sentence_vote_uses_the_latest_calibration_and_records_its_version(corpus, django_user_model):
    cosine = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "sentence_vote"}
    )
    assert cosine.stats["f1"] == "cosine" and "no calibration model for en-fr" in cosine.stats["f1_note"]
    assert {p.evidence["f1"] for p in DocumentPairCandidate.objects.filter(run=cosine)} == {"cosine"}
    # Reviewers' labels on a sentence run of the same corpus train the pair's calibration head.
    sentences = execute_run(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"k": 3, "filters": False, "strategy": "forward"},
    )
    _label_candidates(sentences, django_user_model)
    execute_run(kind=RunKind.CALIBRATE, src_lang="en", tgt_lang="fr", params={"method": "head"})
    artefact = Artefact.objects.get(kind=ArtefactKind.CALIBRATION)
    assert artefact.params["phi"] == {"margin": "ratio", "k": 3}
    assert artefact.params["encoder"] == sentences.encoder_id
    calibrated = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "sentence_vote"}
    )
    assert calibrated.stats["f1"] == "calibrated"
    assert calibrated.stats["calibration"] == {
        "id": artefact.pk,
        "name": "calibration-en-fr",
        "version": 1,
        "method": "head",
        "phi": {"margin": "ratio", "k": 3},
    }
    pairs = list(DocumentPairCandidate.objects.filter(run=calibrated))
    assert pairs and {p.evidence["f1"] for p in pairs} == {"calibration-en-fr v1"}
    before = dict(DocumentPairCandidate.objects.filter(run=cosine).values_list("src_id", "score"))
    assert any(before.get(p.src_id) != pytest.approx(p.score) for p in pairs)  # f1 did change the votes
    # A newer version is taken up; switching it off, or a model of another encoder, falls back to the cosine.
    execute_run(kind=RunKind.CALIBRATE, src_lang="en", tgt_lang="fr", params={"method": "platt"})
    newer = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "sentence_vote"}
    )
    assert newer.stats["calibration"]["version"] == 2 and newer.stats["calibration"]["method"] == "platt"
    off = execute_run(
        kind=RunKind.DOCUMENT,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        params={"method": "sentence_vote", "calibrated_f1": False},
    )
    assert off.stats["f1"] == "cosine" and "switched off" in off.stats["f1_note"]
    Artefact.objects.filter(kind=ArtefactKind.CALIBRATION).update(params={"method": "platt", "encoder": -1})
    foreign = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "sentence_vote"}
    )
    assert foreign.stats["f1"] == "cosine" and "trained on the scores of encoder -1" in foreign.stats["f1_note"]
    assert foreign.status == JobStatus.SUCCEEDED
    count = execute_run(
        kind=RunKind.DOCUMENT, src_corpus=corpus, src_lang="en", tgt_lang="fr", params={"method": "count"}
    )
    assert "f1" not in count.stats


def test_platt_model_reads_no_embedding():
    rng = np.random.default_rng(1)
    s_emb, t_emb = _unit(rng, 4, 3), _unit(rng, 5, 3)
    sims, ids = knn_exact(s_emb, t_emb, 2)
    platt = PlattScaling().fit(None, np.array([0.5, 1.0, 1.5, 2.0]), np.array([0, 0, 1, 1]))
    f1 = VoteCalibration(None, platt, Margin.ABSOLUTE, k=2).f1(s_emb, t_emb, sims, ids)
    np.testing.assert_allclose(f1, platt.predict(None, sims.ravel()).reshape(sims.shape), rtol=1e-6)
