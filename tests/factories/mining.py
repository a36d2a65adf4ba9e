"""Factories for the mining models (shared by all apps' tests; append only)."""

from __future__ import annotations

import factory
from factory.django import DjangoModelFactory

from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    Document,
    JobStatus,
    MiningRun,
    RunKind,
    Sentence,
    SentencePairCandidate,
)


class CorpusFactory(DjangoModelFactory):
    class Meta:
        model = Corpus

    name = factory.Sequence(lambda n: f"corpus-{n}")
    languages = factory.LazyFunction(lambda: ["en", "fr"])


class DocumentFactory(DjangoModelFactory):
    class Meta:
        model = Document

    corpus = factory.SubFactory(CorpusFactory)
    lang = "en"
    external_id = factory.Sequence(lambda n: f"doc-{n}")


class SentenceFactory(DjangoModelFactory):
    class Meta:
        model = Sentence

    document = factory.SubFactory(DocumentFactory)
    corpus = factory.SelfAttribute("document.corpus")
    lang = factory.SelfAttribute("document.lang")
    position = factory.Sequence(lambda n: n)
    text = factory.Sequence(lambda n: f"Sentence number {n}.")
    norm_hash = factory.Sequence(lambda n: n)


class EncoderArtefactFactory(DjangoModelFactory):
    class Meta:
        model = Artefact

    kind = ArtefactKind.ENCODER
    name = factory.Sequence(lambda n: f"encoder-{n}")
    version = 1


class MiningRunFactory(DjangoModelFactory):
    class Meta:
        model = MiningRun

    kind = RunKind.SENTENCE
    src_corpus = factory.SubFactory(CorpusFactory)
    tgt_corpus = factory.SelfAttribute("src_corpus")
    src_lang = "en"
    tgt_lang = "fr"
    status = JobStatus.SUCCEEDED
    params = factory.LazyFunction(
        lambda: {"knn": "exact", "margin": "ratio", "k": 4, "strategy": "max_score", "threshold": None, "filters": True}
    )


class SentencePairCandidateFactory(DjangoModelFactory):
    class Meta:
        model = SentencePairCandidate

    run = factory.SubFactory(MiningRunFactory)
    src = factory.SubFactory(
        SentenceFactory, document__corpus=factory.SelfAttribute("...run.src_corpus"), document__lang="en"
    )
    tgt = factory.SubFactory(
        SentenceFactory, document__corpus=factory.SelfAttribute("...run.tgt_corpus"), document__lang="fr"
    )
    cosine = 0.8
    score = 1.1
    rank = factory.Sequence(lambda n: n + 1)
    strategy = "max_score"
    filter_reason = ""
