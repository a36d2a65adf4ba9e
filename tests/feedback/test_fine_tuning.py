"""Fine-tuning a DAN on reviews through a run: labels give positives and hard negatives, the new encoder is compared
with the old on a held-out corpus, and only one that is not worse there is offered for mining."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.urls import reverse

from annotation.services import label_pair
from feedback.services import fine_tuning
from feedback.services.fine_tuning import check_fine_tune, gate_decision, review_pairs
from mining.forms import RunStartForm
from mining.ingest.text import norm_hash
from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    Document,
    GoldSentencePair,
    JobStatus,
    MiningRun,
    RunKind,
    Sentence,
    SentencePairCandidate,
)
from mining.params import FineTuneParams
from mining.services.encoders import encoder_default, load_encoder
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.factories.mining import PAIRS

TSV = Path(__file__).resolve().parents[1] / "data" / "import" / "admin-en-fr.tsv"
# Real en-fr pairs: Django admin's own strings and their French translations (40, header skipped).
ADMIN = [tuple(line.split("\t")) for line in TSV.read_text(encoding="utf-8").splitlines()[1:]]
SMALL_DAN = {"epochs": 3, "hard_epochs": 1, "hard_negatives": 2, "batch_size": 8, "n_buckets": 4096, "seed": 1}
FAST = {"epochs": 2, "lr": 1e-3, "emb_lr": 3e-2, "validation_share": 0.0, "eval_share": 0.5, "eval_min_words": 1}


def corpus_of(name: str, pairs: list[tuple[str, str]]) -> Corpus:
    """A two-document en-fr corpus whose pairs are gold, the French side in reverse order."""
    corpus = Corpus.objects.create(name=name, languages=["en", "fr"])
    docs = {lang: Document.objects.create(corpus=corpus, lang=lang, external_id="doc") for lang in ("en", "fr")}
    for i, (en, fr) in enumerate(pairs):
        s = Sentence.objects.create(
            corpus=corpus,
            document=docs["en"],
            lang="en",
            position=i,
            text=en,
            norm_hash=norm_hash(en),
            detected_lang="en",
        )
        t = Sentence.objects.create(
            corpus=corpus,
            document=docs["fr"],
            lang="fr",
            position=len(pairs) - 1 - i,
            text=fr,
            norm_hash=norm_hash(fr),
            detected_lang="fr",
        )
        GoldSentencePair.objects.create(corpus=corpus, src=s, tgt=t)
    return corpus


def executed(run: MiningRun) -> MiningRun:
    execute_job(run=run)
    run.refresh_from_db()
    return run


@pytest.fixture
def reviewed(django_user_model):
    """A small DAN trained on one corpus, a run of it on a second corpus whose candidates are all judged (GOOD when
    gold), and a third corpus held out for evaluation."""
    train = corpus_of("ft-train", PAIRS + ADMIN[:10])
    base = executed(
        run_create(
            kind=RunKind.TRAIN_ENCODER, src_corpus=train, src_lang="en", tgt_lang="fr", params=SMALL_DAN, enqueue=False
        )
    )
    assert base.status == JobStatus.SUCCEEDED, base.error
    encoder = Artefact.objects.get(pk=base.stats["artefact_id"])
    pool = corpus_of("ft-review", ADMIN[10:25])
    mined = executed(
        run_create(
            kind=RunKind.SENTENCE,
            src_corpus=pool,
            src_lang="en",
            tgt_lang="fr",
            encoder=encoder,
            params={"k": 3, "filters": False, "strategy": "forward"},
            enqueue=False,
        )
    )
    assert mined.status == JobStatus.SUCCEEDED, mined.error
    gold = dict(ADMIN)
    reviewer = django_user_model.objects.create_user("ft", password="pw-ft-1234", is_staff=True)
    verdicts = {}
    for c in SentencePairCandidate.objects.filter(run=mined).select_related("src", "tgt"):
        verdicts[c.pk] = "GOOD" if gold.get(c.src.text) == c.tgt.text else "BAD"
        label_pair(reviewer=reviewer, sentence_pair_id=c.pk, verdict=verdicts[c.pk])
    held_out = corpus_of("ft-eval", ADMIN[25:])
    return {"encoder": encoder, "run": mined, "eval": held_out, "verdicts": verdicts, "train": train}


def fine_tune(setup: dict, **params) -> MiningRun:
    return executed(
        run_create(
            kind=RunKind.FINE_TUNE,
            src_corpus=setup["train"],
            encoder=setup["encoder"],
            src_lang="en",
            tgt_lang="fr",
            enqueue=False,
            params={"eval_corpus": setup["eval"].pk, **FAST, **params},
        )
    )


def offered() -> set[int]:
    return {a.pk for a in RunStartForm().fields["encoder"].queryset}


@pytest.mark.django_db
def test_reviews_give_positives_and_high_scoring_hard_negatives(reviewed):
    verdicts = reviewed["verdicts"]
    data = review_pairs(src_lang="en", tgt_lang="fr")
    assert len(data.positives) == sum(v == "GOOD" for v in verdicts.values()) > 0
    bad = SentencePairCandidate.objects.filter(pk__in=[k for k, v in verdicts.items() if v == "BAD"])
    scores = sorted(SentencePairCandidate.objects.filter(run=reviewed["run"]).values_list("score", flat=True))
    median = (scores[(len(scores) - 1) // 2] + scores[len(scores) // 2]) / 2
    assert len(data.hard_negatives) == bad.filter(score__gte=median).count()
    assert data.corpus_ids == {reviewed["run"].src_corpus_id} and data.n_reviewed == len(verdicts)
    assert review_pairs(src_lang="en", tgt_lang="fr", campaign_id=10**6).n_reviewed == 0


@pytest.mark.django_db
def test_fine_tune_run_stores_both_figures_and_gates_the_new_encoder(reviewed, staff_client):
    run = fine_tune(reviewed)
    assert run.status == JobStatus.SUCCEEDED, run.error
    summary = run.stats["fine_tune"]
    before, after = summary["before"], summary["after"]
    assert summary["eval_gold"] >= 2 and summary["best_epoch"] == 2 and summary["positives"] > 0
    assert run.stats["gate"] == gate_decision(before, after) in ("passed", "failed")
    assert run.stats["p_at_1_before"] == before["p_at_1"] and run.stats["f1_after"] == after["f1"]
    tuned = Artefact.objects.get(pk=run.stats["artefact_id"])
    assert (tuned.name, tuned.version, tuned.params["fine_tuned_from"]) == ("dan", 2, reviewed["encoder"].pk)
    assert tuned.metrics["fine_tune"]["before"] == before and tuned.is_active == (run.stats["gate"] == "passed")
    assert (tuned.pk in offered()) == tuned.is_active and reviewed["encoder"].pk in offered()
    assert load_encoder(tuned).encode(["Delete multiple objects"], "en").shape == (1, 512)
    page = staff_client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert f"gate: <strong>{run.stats['gate']}</strong>" in page
    assert f"P@1 before: <strong>{before['p_at_1']}</strong>" in page


@pytest.mark.django_db
def test_an_encoder_worse_on_the_held_out_corpus_is_stored_but_not_offered(reviewed, monkeypatch, staff_client):
    figures = iter([{"p_at_1": 0.8, "f1": 0.6}, {"p_at_1": 0.7, "f1": 0.7}])  # before, after: P@1 drops
    monkeypatch.setattr(fine_tuning, "_figures", lambda report: next(figures))
    run = fine_tune(reviewed)
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert run.stats["gate"] == "failed" and run.stats["p_at_1_after"] == 0.7
    tuned = Artefact.objects.get(pk=run.stats["artefact_id"])
    assert not tuned.is_active and tuned.pk not in offered()
    page = staff_client.get(reverse("calibration", args=["en", "fr"])).content.decode()
    assert "failed: not offered" in page and "0.800 → 0.700" in page


@pytest.mark.django_db
def test_fine_tuning_that_keeps_the_starting_weights_stores_nothing(reviewed, monkeypatch):
    from mining.core.encoders import dan_finetune
    from mining.core.encoders.dan_finetune import FineTuneResult

    real = dan_finetune.fine_tune_dan

    def kept(encoder, *args, **kwargs):
        result = real(encoder, *args, **kwargs)
        return FineTuneResult(
            encoder,
            0,
            (0.5, 0.4),
            *[
                getattr(result, f)
                for f in ("n_positives", "n_hard_negatives", "n_replay", "n_val_positives", "n_val_hard_negatives")
            ],
        )

    monkeypatch.setattr(dan_finetune, "fine_tune_dan", kept)  # execute_fine_tune imports it when it runs
    run = fine_tune(reviewed)
    assert run.status == JobStatus.SUCCEEDED, run.error
    assert run.stats["gate"] == "unchanged" and "artefact_id" not in run.stats
    assert Artefact.objects.filter(kind=ArtefactKind.ENCODER, name="dan").count() == 1


@pytest.mark.django_db
def test_fine_tuning_refuses_leaky_or_wrong_inputs(reviewed):
    run = fine_tune(reviewed, eval_corpus=reviewed["run"].src_corpus_id)
    assert run.status == JobStatus.FAILED and "holds reviewed pairs" in run.error
    run = fine_tune(reviewed, eval_corpus=reviewed["train"].pk)
    assert run.status == JobStatus.FAILED and "pick a held-out corpus" in run.error
    with pytest.raises(ValueError, match="epoch: is not a parameter of fine_tune runs"):  # refused at creation
        fine_tune(reviewed, epoch=3)
    with pytest.raises(ValueError, match="only the app's DAN"):
        check_fine_tune(base=encoder_default(), src_lang="en", tgt_lang="fr", params={})
    with pytest.raises(ValueError, match="not de-fr"):
        check_fine_tune(base=reviewed["encoder"], src_lang="de", tgt_lang="fr", params={})


def test_gate_decision():
    old = {"p_at_1": 0.7, "f1": 0.5}
    assert gate_decision(old, {"p_at_1": 0.7, "f1": 0.5}) == "passed"  # not worse
    assert gate_decision(old, {"p_at_1": 0.75, "f1": 0.49}) == "failed"
    assert gate_decision(old, {"p_at_1": 0.69, "f1": 0.6}) == "failed"
    assert gate_decision(old, old, changed=False) == "unchanged"


@pytest.mark.django_db
def test_calibration_page_starts_a_fine_tuning_run(reviewed, staff_client, reviewer_user):
    from django.test import Client

    reviewer_client = Client()
    reviewer_client.force_login(reviewer_user)
    page = staff_client.get(reverse("calibration", args=["en", "fr"])).content.decode()
    assert 'action="/calibration/en-fr/fine-tune/"' in page and "ft-eval" in page
    url = reverse("calibration-fine-tune", args=["en", "fr"])
    assert reviewer_client.post(url, {"encoder": reviewed["encoder"].pk}).status_code == 403
    response = staff_client.post(
        url, {"encoder": reviewed["encoder"].pk, "eval_corpus": reviewed["eval"].pk, "campaign": "", "seed": "3"}
    )
    run = MiningRun.objects.get(kind=RunKind.FINE_TUNE)
    assert response.status_code == 302 and response["Location"] == reverse("run-detail", args=[run.pk])
    assert run.encoder == reviewed["encoder"] and run.src_corpus == reviewed["train"]
    assert run.params == FineTuneParams(eval_corpus=reviewed["eval"].pk, seed=3).to_dict()  # as stored: typed
    response = staff_client.post(url, {"encoder": reviewed["encoder"].pk, "eval_corpus": ""}, follow=True)
    assert "held-out evaluation corpus" in response.content.decode()
    assert MiningRun.objects.filter(kind=RunKind.FINE_TUNE).count() == 1
