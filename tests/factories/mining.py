"""Factories for the mining models, and the builders of runs and corpora that several apps' tests share (append
only)."""

from __future__ import annotations

from pathlib import Path

import factory
import numpy as np
from factory.django import DjangoModelFactory

from mining.ingest.text import norm_hash
from mining.models import (
    Artefact,
    ArtefactKind,
    Corpus,
    Document,
    DocumentPairCandidate,
    GoldSentencePair,
    JobStatus,
    MiningRun,
    RunKind,
    Sentence,
    SentencePairCandidate,
)
from mining.services.imports import import_execute, import_job_create
from mining.services.runs import run_create
from pcapp.jobs import execute_job

DATA = Path(__file__).resolve().parent.parent / "data"


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


# --- builders shared by several apps' tests ---------------------------------------------------------------------


def make_run(n: int = 6, *, run=None, scores=None, reasons=None, texts=None, **run_kwargs):
    """A run with n candidates ranked by descending score (score 1.5, 1.4, ... by default)."""
    run = run or MiningRunFactory(**run_kwargs)
    scores = scores or [1.5 - 0.1 * i for i in range(n)]
    for i, score in enumerate(scores):
        src_text, tgt_text = texts[i] if texts else (f"source {i}", f"cible {i}")
        src = SentenceFactory(document__corpus=run.src_corpus, document__lang="en", text=src_text)
        tgt = SentenceFactory(document__corpus=run.tgt_corpus, document__lang="fr", text=tgt_text)
        SentencePairCandidate.objects.create(
            run=run, src=src, tgt=tgt, cosine=0.5, score=score, rank=i + 1, filter_reason=(reasons or {}).get(i, "")
        )
    return run


def make_document_run(*, aligned: bool):
    """A document run with 3 document pairs (scores 1.5, 1.2 pre-filtered, 1.1; run threshold 1.0) of 2-sentence
    pages, and with `aligned` a succeeded alignment run holding each pair's 2 sentence pairs (one flagged identical)."""
    run = MiningRunFactory(kind=RunKind.DOCUMENT, params={"method": "rerank", "threshold": 1.0})
    pairs = []
    for i, (score, reason) in enumerate([(1.5, ""), (1.2, "word_ratio"), (1.1, "")]):
        docs = []
        for lang, word in (("en", "Page"), ("fr", "Feuille")):
            doc = DocumentFactory(
                corpus=run.src_corpus,
                lang=lang,
                external_id=f"p{i}",
                title=f"{word} {i}",
                url=f"https://example.invalid/{lang}/{i}",
                n_sentences=2,
            )
            for k in range(2):
                SentenceFactory(document=doc, position=k, text=f"{word} {i} line {k}.")
            docs.append(doc)
        pairs.append(
            DocumentPairCandidate.objects.create(
                run=run,
                src=docs[0],
                tgt=docs[1],
                cosine=0.9,
                score=score,
                rank=i + 1,
                strategy="max_score",
                filter_reason=reason,
                evidence={"method": "rerank", "retrieval": {"by": "hide", "rank": 1}},
            )
        )
    if aligned:
        align = MiningRunFactory(kind=RunKind.ALIGN, parent=run, src_corpus=run.src_corpus, params={})
        rank = 0
        for pair in pairs:
            src = list(pair.src.sentences.order_by("position"))
            tgt = list(pair.tgt.sentences.order_by("position"))
            for k in range(2):
                rank += 1
                SentencePairCandidate.objects.create(
                    run=align,
                    src=src[k],
                    tgt=tgt[k],
                    cosine=0.8,
                    score=0.8,
                    rank=rank,
                    strategy="align",
                    filter_reason="identical" if (pair.rank, k) == (3, 1) else "",
                    doc_pair=pair,
                    evidence={"bead": [1, 1]},
                )
    return run


PAIRS = [
    ("The file could not be opened.", "Le fichier n'a pas pu être ouvert."),
    ("Please enter a valid email address.", "Veuillez saisir une adresse électronique valide."),
    ("This field is required.", "Ce champ est obligatoire."),
    ("Your password has been changed successfully.", "Votre mot de passe a été modifié avec succès."),
    ("The server is not responding at the moment.", "Le serveur ne répond pas pour le moment."),
    ("Delete the selected items from the list.", "Supprimer les éléments sélectionnés de la liste."),
    (
        "Search results for your query are shown below.",
        "Les résultats de recherche pour votre requête sont affichés ci-dessous.",
    ),
    ("The download will start in a few seconds.", "Le téléchargement commencera dans quelques secondes."),
    ("You do not have permission to view this page.", "Vous n'avez pas la permission de voir cette page."),
    ("Save your changes before closing the window.", "Enregistrez vos modifications avant de fermer la fenêtre."),
    ("The package was installed without errors.", "Le paquet a été installé sans erreur."),
    ("Choose a language from the menu.", "Choisissez une langue dans le menu."),
]


def pairs_corpus(name: str = "mini-en-fr") -> Corpus:
    """An en-fr corpus of the 12 PAIRS as one document a side (the French side in reverse order), no gold pairs."""
    corpus = Corpus.objects.create(name=name, languages=["en", "fr"])
    docs = {lang: Document.objects.create(corpus=corpus, lang=lang, external_id="doc") for lang in ("en", "fr")}
    for i, (en, fr) in enumerate(PAIRS):
        Sentence.objects.create(
            corpus=corpus,
            document=docs["en"],
            lang="en",
            position=i,
            text=en,
            norm_hash=norm_hash(en),
            detected_lang="en",
        )
        # The French side in another order, so position gives nothing away.
        j = len(PAIRS) - 1 - i
        Sentence.objects.create(
            corpus=corpus,
            document=docs["fr"],
            lang="fr",
            position=j,
            text=fr,
            norm_hash=norm_hash(fr),
            detected_lang="fr",
        )
    return corpus


def gold_corpus(name: str) -> Corpus:
    """``pairs_corpus`` with each of the PAIRS stored as a gold pair."""
    corpus = pairs_corpus(name)
    en = {s.text: s for s in Sentence.objects.filter(corpus=corpus, lang="en")}
    fr = {s.text: s for s in Sentence.objects.filter(corpus=corpus, lang="fr")}
    for e, f in PAIRS:
        GoldSentencePair.objects.create(corpus=corpus, src=en[e], tgt=fr[f])
    return corpus


def candidate_pairs(run: MiningRun) -> list[tuple[int, int, float]]:
    """A run's sentence-pair candidates as (src id, tgt id, score), by rank."""
    return list(SentencePairCandidate.objects.filter(run=run).order_by("rank").values_list("src_id", "tgt_id", "score"))


def docs_corpus() -> Corpus:
    """The small en-fr documentation corpus of tests/data/import/admin-docs.jsonl, imported."""
    job = import_execute(
        job=import_job_create(corpus_name="docs", fmt="jsonl", paths=[str(DATA / "import" / "admin-docs.jsonl")])
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.corpus


def execute_run(**kw) -> MiningRun:
    """Create a run (``run_create`` keywords), execute it inline, and return it as stored; it must succeed."""
    run = run_create(enqueue=False, **kw)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


SYNTHETIC_DIM = 96
_WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()


class _TableEncoder:
    """Looks each text's vector up in a table (rows L2-normalised)."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table

    def encode(self, texts: list[str], lang: str) -> np.ndarray:
        return np.stack([self.table[t] for t in texts]).astype(np.float32)


def _text(rng: np.random.Generator, i: int, lang: str) -> str:
    return f"{' '.join(rng.choice(_WORDS, 5))} {lang} item {i}"


def synthetic_corpus(n: int, register_encoder, *, seed: int = 0, name: str = "synthetic") -> tuple[Corpus, Artefact]:
    """n English and n French sentences; 70 % of them planted pairs (noisy copies), the rest unrelated."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal((n, SYNTHETIC_DIM)).astype(np.float32)
    tgt = rng.standard_normal((n, SYNTHETIC_DIM)).astype(np.float32)
    perm = rng.permutation(n)
    planted = perm[: int(0.7 * n)]
    tgt[planted] = src[np.arange(len(planted))] + 0.6 * rng.standard_normal((len(planted), SYNTHETIC_DIM))
    src /= np.linalg.norm(src, axis=1, keepdims=True)
    tgt /= np.linalg.norm(tgt, axis=1, keepdims=True)
    corpus = Corpus.objects.create(name=name, languages=["en", "fr"])
    table: dict[str, np.ndarray] = {}
    rows = []
    for lang, emb in (("en", src), ("fr", tgt)):
        doc = Document.objects.create(corpus=corpus, lang=lang, external_id=f"doc-{lang}")
        for i in range(n):
            text = _text(rng, i, lang)
            table[text] = emb[i]
            rows.append(
                Sentence(
                    corpus=corpus,
                    document=doc,
                    lang=lang,
                    position=i,
                    text=text,
                    norm_hash=norm_hash(text),
                    detected_lang=lang,
                )
            )
    Sentence.objects.bulk_create(rows, batch_size=5000)
    encoder_name = f"table-{name}"
    register_encoder(encoder_name, lambda threads=1, **_: _TableEncoder(table))
    artefact = Artefact.objects.create(kind=ArtefactKind.ENCODER, name=encoder_name, version=1, params={})
    return corpus, artefact


def sentence_run(corpus: Corpus, encoder: Artefact, *, enqueue: bool, **params) -> MiningRun:
    """An en-fr sentence run of the corpus with the encoder (k = 4 unless params say), created (and queued with
    `enqueue`)."""
    return run_create(
        kind=RunKind.SENTENCE,
        src_corpus=corpus,
        src_lang="en",
        tgt_lang="fr",
        encoder=encoder,
        params={"k": 4, **params},
        enqueue=enqueue,
    )


def inline_sentence_run(corpus: Corpus, encoder: Artefact, **params) -> MiningRun:
    """``sentence_run`` executed in this process; it must succeed."""
    run = sentence_run(corpus, encoder, enqueue=False, **params)
    execute_job(run=run)
    run.refresh_from_db()
    assert run.status == JobStatus.SUCCEEDED, run.error
    return run


def run_state(run: MiningRun) -> str:
    """A run's status, stage and error as stored now (for assertion messages)."""
    run.refresh_from_db()
    return f"run {run.pk} {run.status} stage={run.stage} error={run.error!r}"
