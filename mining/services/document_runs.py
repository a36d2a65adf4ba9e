"""Document runs: match documents (retrieve-then-rerank, Sentence-Avg, HiDE, Document BoW, sentence-vote, count
baseline) and align matched pairs into sentence pairs. Training a document model is mining.services.doc_models'.

The numeric work is in mining.core (docembed, docmatch, docvote, align, knn, candidates); this module loads, calls and
saves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import transaction

from ..core.doc_evaluation import selection_figures
from ..core.docembed import (
    DocumentBow,
    DocumentEmbedder,
    Documents,
    Hide,
    SentenceAvg,
)
from ..core.docfilter import DEFAULT_THRESHOLDS, PrefilterThresholds, document_stats
from ..core.docmatch import HideModel
from ..core.docmethod import DocMethod
from ..core.docrerank import DEFAULT_WEIGHT as DEFAULT_RERANK_WEIGHT
from ..core.docrun import DEFAULT_URL_WEIGHT, Confidence, DocMatchConfig, DocumentMatch
from ..core.docrun import match_documents as core_match
from ..core.urlsignals import UrlPairs, url_pairs
from ..db.bulk import copy_rows
from ..models import (
    Artefact,
    ArtefactKind,
    Corpus,
    Document,
    DocumentPairCandidate,
    GoldDocumentPair,
    MiningRun,
    Sentence,
)
from ..params import DocumentRunParams
from .embeddings import embed_side
from .encoders import artefact_path, encoder_default, load_encoder
from .progress import ProgressReporter
from .runs import run_record_timing
from .vote_calibration import vote_calibration


def document_run_params(params: dict) -> DocumentRunParams:
    """A document run's stored parameters, checked and typed (method a `DocMethod`, margin a `Margin`, ...);
    ParamsError (a ValueError) names each bad parameter."""
    return DocumentRunParams.from_stored(params)


def match_config(p: DocumentRunParams, *, prefilter: PrefilterThresholds = DEFAULT_THRESHOLDS) -> DocMatchConfig:
    """The core's settings from `document_run_params`' output."""
    return DocMatchConfig(
        k=p.k,
        margin=p.margin,
        strategy=p.strategy,
        threshold=p.threshold,
        neighbours=p.neighbours,
        w1=p.w1,
        w2=p.w2,
        vote_form=p.vote_form,
        top_n=p.top_n,
        rerank_weight=DEFAULT_RERANK_WEIGHT if p.rerank_weight is None else p.rerank_weight,
        url_weight=DEFAULT_URL_WEIGHT if p.url_weight is None else p.url_weight,
        prefilter=prefilter if p.prefilter else None,
        ranked=3,
    )


@dataclass(frozen=True)
class DocSide:
    """Every sentence of one corpus side grouped by document: rows of document i are offsets[i]:offsets[i+1]."""

    doc_ids: np.ndarray  # (n_docs,) Document ids
    offsets: np.ndarray  # (n_docs + 1,)
    sent_ids: np.ndarray  # (n_sents,) Sentence ids
    positions: np.ndarray  # (n_sents,)
    texts: list[str]
    detected: list[str]

    def documents(self, emb: np.ndarray | None) -> Documents:
        """The core's view of this side (texts may be absent: `texts=[]`, as bench/document_speed.py builds)."""
        return Documents(self.offsets, self.texts or None, emb)


def doc_side(corpus: Corpus, lang: str) -> DocSide:
    """Load the sentences of a corpus's documents in one language, ordered by document and position."""
    return _side(Sentence.objects.filter(corpus=corpus, lang=lang))


def doc_side_of(doc_ids: np.ndarray) -> DocSide:
    """The sentences of the given documents (any corpus, one language), ordered by document id and position."""
    return _side(Sentence.objects.filter(document_id__in=[int(d) for d in doc_ids]))


def doc_urls(doc_ids: np.ndarray) -> tuple[list[str], list[str]]:
    """(URL, language) of each document, in the given order ('' for a document without a URL)."""
    got = {
        d: (u, lang)
        for d, u, lang in Document.objects.filter(pk__in=[int(d) for d in doc_ids]).values_list("id", "url", "lang")
    }
    pairs = [got.get(int(d), ("", "")) for d in doc_ids]
    return [u for u, _ in pairs], [lang for _, lang in pairs]


def _side(sentences) -> DocSide:
    rows = sentences.order_by("document_id", "position").values_list(
        "document_id", "id", "position", "text", "detected_lang"
    )
    docs, sids, pos, texts, det = [], [], [], [], []
    for d, s, p, t, dl in rows.iterator(chunk_size=20_000):
        docs.append(d)
        sids.append(s)
        pos.append(p)
        texts.append(t)
        det.append(dl)
    docs_arr = np.asarray(docs, dtype=np.int64)
    change = np.flatnonzero(np.diff(docs_arr)) + 1 if len(docs_arr) else np.empty(0, np.int64)
    starts = np.concatenate([[0], change]) if len(docs_arr) else np.empty(0, np.int64)
    return DocSide(
        docs_arr[starts],
        np.concatenate([starts, [len(docs_arr)]]).astype(np.int64),
        np.asarray(sids, dtype=np.int64),
        np.asarray(pos, dtype=np.int64),
        texts,
        det,
    )


def embed_doc_side(
    run: MiningRun,
    corpus: Corpus,
    lang: str,
    side: DocSide,
    reporter: ProgressReporter | None,
    *,
    variant: str = "by-document",
) -> np.ndarray:
    """The side's sentence embeddings, cached under the corpus's embeddings folder as `variant`."""
    encoder = load_encoder(run.encoder)
    return embed_side(
        corpus=corpus,
        lang=lang,
        encoder_artefact=run.encoder,
        encode=encoder.encode,
        ids=side.sent_ids,
        texts=side.texts,
        progress=reporter.progress if reporter is not None else None,
        variant=variant,
    )


def _doc_model_artefact(run: MiningRun, name: str, *, required: bool = True) -> Artefact | None:
    """The run's document model `name` ("hide" or "bow"): params.doc_model (an artefact id), else the latest one
    trained for the run's language pair (HiDE: over the run's sentence encoder). None when not `required`."""
    label = {"hide": "HiDE", "bow": "Document BoW"}[name]
    models = Artefact.objects.filter(kind=ArtefactKind.DOC_MODEL, name=name).select_related("trained_on")
    asked = document_run_params(run.params).doc_model
    if asked:
        artefact = models.filter(pk=asked).first()
    else:
        latest = models.filter(src_lang=run.src_lang, tgt_lang=run.tgt_lang)
        if name == "hide" and not required:  # RERANK's optional retrieval model must read this run's embeddings
            latest = latest.filter(params__encoder=run.encoder_id)
        artefact = latest.order_by("-version").first()
    if artefact is None and required:
        raise ValueError(
            f"no trained {label} model for {run.src_lang}-{run.tgt_lang}"
            f"{' with id ' + str(asked) if asked else ''}: "
            f"train one first (manage.py match_documents --method {name} --train --train-corpus OTHER)"
        )
    return artefact


def _load_doc_model(artefact: Artefact) -> DocumentEmbedder:
    if artefact.name == "bow":
        return DocumentBow.load(artefact_path(artefact), threads=settings.PCAPP_COMPUTE_THREADS)
    return Hide(HideModel.load(artefact_path(artefact)))


def _model_record(artefact: Artefact | None, run: MiningRun) -> dict:
    """What the run's stats say about its document model, labelled when it was trained on the corpus being matched."""
    if artefact is None:
        return {}
    same = artefact.trained_on_id is not None and artefact.trained_on_id in (run.src_corpus_id, run.tgt_corpus_id)
    record = {
        "doc_model": {
            "id": artefact.pk,
            "name": artefact.name,
            "version": artefact.version,
            "trained_on": str(artefact.trained_on) if artefact.trained_on else "",
            "trained_on_this_corpus": same,
        }
    }
    if same:  # shown on the run page beside the figures
        record["doc_model_warning"] = (
            f"{artefact.name} v{artefact.version} was trained on this corpus's gold document pairs: "
            "its pairs say nothing about new documents"
        )
    return record


def _embedder_for(p: DocumentRunParams, run: MiningRun) -> tuple[DocumentEmbedder | None, Artefact | None]:
    """The method's document embedder and its artefact: HiDE / BoW need theirs; RERANK retrieves with HiDE when the
    language pair has one over this encoder, else with Sentence-Avg."""
    method = p.method
    if method.needs_model:
        artefact = _doc_model_artefact(run, method.value)
        return _load_doc_model(artefact), artefact
    if method is DocMethod.RERANK:
        artefact = _doc_model_artefact(run, "hide", required=False)
        return (_load_doc_model(artefact), artefact) if artefact else (SentenceAvg(), None)
    return (SentenceAvg(), None) if method is DocMethod.SENTENCE_AVG else (None, None)


def _gold_split(
    run: MiningRun, p: DocumentRunParams, src: DocSide, tgt: DocSide, model: Artefact | None
) -> tuple[dict[int, int], dict[int, int], str]:
    """The corpus's gold document pairs as (learn, evaluate) dicts of source index -> target index, and a note.

    A seeded `learn_share` of them may tune the run (pre-filter thresholds, the vote's weight); the rest measure
    it. When the document model was trained on this corpus, every gold pair of the pair of languages trained it and
    none is left to measure the run fairly."""
    s_index = {int(d): i for i, d in enumerate(src.doc_ids)}
    t_index = {int(d): i for i, d in enumerate(tgt.doc_ids)}
    gold = sorted(
        {
            (s_index[s], t_index[t])
            for s, t in gold_doc_pairs(run.src_corpus, run.src_lang, run.tgt_lang)
            if s in s_index and t in t_index
        }
    )
    gold = list(dict(gold).items())  # one gold target per source document
    if not gold:
        return {}, {}, "no gold document pairs"
    order = np.random.default_rng([p.seed, 17]).permutation(len(gold))
    n_learn = int(round(p.learn_share * len(gold)))
    learn = dict(gold[i] for i in order[:n_learn])
    evaluate = dict(gold[i] for i in order[n_learn:])
    if _model_record(model, run).get("doc_model", {}).get("trained_on_this_corpus"):
        return learn, {}, "the document model was trained on this corpus's gold pairs: none is held out"
    return learn, evaluate, f"{len(evaluate)} held-out gold pairs ({len(learn)} others may tune the run)"


def execute_document_run(run: MiningRun, reporter: ProgressReporter) -> dict:
    """Match documents of run.src_lang to documents of run.tgt_lang with the method in run.params."""
    p = document_run_params(run.params)
    method = p.method
    if run.encoder is None and method.reads_sentence_embeddings:
        MiningRun.objects.filter(pk=run.pk).update(encoder=encoder_default())
        run.refresh_from_db()
    src, tgt = doc_side(run.src_corpus, run.src_lang), doc_side(run.tgt_corpus, run.tgt_lang)
    if len(src.doc_ids) == 0 or len(tgt.doc_ids) == 0:
        raise ValueError(
            f"nothing to match: {len(src.doc_ids)} '{run.src_lang}' and {len(tgt.doc_ids)} '{run.tgt_lang}' documents"
        )
    embedder, artefact = _embedder_for(p, run)
    s_emb = t_emb = None  # Document BoW reads the words, not sentence embeddings
    if method.reads_sentence_embeddings:
        t0 = time.perf_counter()
        reporter.update(stage="embed-src", done=0, total=len(src.texts), force=True)
        s_emb = embed_doc_side(run, run.src_corpus, run.src_lang, src, reporter)
        reporter.update(stage="embed-tgt", done=0, total=len(tgt.texts), force=True)
        t_emb = embed_doc_side(run, run.tgt_corpus, run.tgt_lang, tgt, reporter)
        run_record_timing(run=run, stage="embed", seconds=time.perf_counter() - t0)
    reporter.update(stage="match", force=True)
    t0 = time.perf_counter()
    learn, evaluate, gold_note = _gold_split(run, p, src, tgt, artefact)
    uses_vote = method in (DocMethod.SENTENCE_VOTE, DocMethod.RERANK)
    vote = vote_calibration(run) if uses_vote else None
    confidence = (lambda sims, ids: vote.f1(s_emb, t_emb, sims, ids)) if vote and vote.model is not None else None
    urls = None
    if method is DocMethod.RERANK and match_config(p).url_weight > 0:
        (s_urls, s_langs), (t_urls, t_langs) = doc_urls(src.doc_ids), doc_urls(tgt.doc_ids)
        if any(s_urls) and any(t_urls):
            urls = url_pairs(s_urls, t_urls, s_langs, t_langs)
    result = match(
        method,
        src.documents(s_emb),
        tgt.documents(t_emb),
        p,
        embedder=embedder,
        learn_from=learn,
        confidence=confidence,
        f1_label=vote.label if vote else "cosine",
        urls=urls,
    )
    run_record_timing(run=run, stage="match", seconds=time.perf_counter() - t0)
    reporter.update(stage="write", total=len(result), force=True)
    written = write_doc_candidates(run, result, src.doc_ids, tgt.doc_ids)
    return {
        "candidates": written,
        "src_documents": int(len(src.doc_ids)),
        "tgt_documents": int(len(tgt.doc_ids)),
        "method": method.value,
        **result.stats,
        **_model_record(artefact, run),
        "gold": {"note": gold_note, **selection_figures(result, evaluate)},
        **(vote.summary() if vote else {}),
    }


def match(
    method: DocMethod,
    src: Documents,
    tgt: Documents,
    p: DocumentRunParams,
    *,
    embedder: DocumentEmbedder | None = None,
    learn_from: dict[int, int] | None = None,
    confidence: Confidence | None = None,
    f1_label: str = "calibrated",
    urls: UrlPairs | None = None,
) -> DocumentMatch:
    """The core's `match_documents` with the run's parameters (`document_run_params`' output): the pre-filter's
    features when both sides carry their texts, its thresholds and RERANK's vote weight learnt on `learn_from`
    (source index -> gold target index) where the run does not fix them."""
    stats = None
    if p.prefilter and src.sentences is not None and tgt.sentences is not None:
        stats = (document_stats(src.sentences, src.offsets), document_stats(tgt.sentences, tgt.offsets))
    return core_match(
        method,
        src,
        tgt,
        match_config(p),
        embedder=embedder,
        doc_stats=stats,
        learn_from=learn_from or {},
        tune_weight=p.rerank_weight is None,
        confidence=confidence,
        f1_label=f1_label,
        urls=urls,
    )


@transaction.atomic
def write_doc_candidates(run: MiningRun, result: DocumentMatch, src: np.ndarray, tgt: np.ndarray) -> int:
    """Replace the run's document candidates (rank 1 = best score); the result indexes the `src`/`tgt` document ids."""
    DocumentPairCandidate.objects.filter(run=run).delete()
    p = document_run_params(run.params)
    strat = p.method.value if p.method.votes else p.strategy.value  # the vote methods keep each best
    return copy_rows(
        DocumentPairCandidate,
        ["run_id", "src_id", "tgt_id", "cosine", "score", "rank", "strategy", "filter_reason", "evidence"],
        (
            (run.pk, int(src[s]), int(tgt[t]), float(c), float(sc), i + 1, strat, reason, ev)
            for i, (s, t, c, sc, reason, ev) in enumerate(
                zip(
                    result.src,
                    result.tgt,
                    result.cosine,
                    result.score,
                    result.filter_reason,
                    result.evidence,
                    strict=True,
                )
            )
        ),
        ["int8", "int8", "int8", "float8", "float8", "int4", "text", "text", "jsonb"],
    )


def gold_doc_pairs(corpus: Corpus, src_lang: str, tgt_lang: str) -> list[tuple[int, int]]:
    out = []
    for s, sl, t, tl in GoldDocumentPair.objects.filter(corpus=corpus).values_list(
        "src_id", "src__lang", "tgt_id", "tgt__lang"
    ):
        if (sl, tl) == (src_lang, tgt_lang):
            out.append((s, t))
        elif (sl, tl) == (tgt_lang, src_lang):
            out.append((t, s))
    return out
