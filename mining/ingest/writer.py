"""Writes documents, sentences and gold alignments of one import with binary COPY, inside the caller's transaction.

Ids are reserved from the sequences first, so sentences and the gold pairs that reference them go out in the same
pass. Language identification of a batch runs in worker processes while the main process hashes and COPYs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import repeat

import numpy as np
from django.db import connection

from ..db.bulk import reserve_ids
from ..models import Corpus, Document, GoldDocumentPair, GoldSentencePair, Sentence
from .crawl.reader import CrawlPage
from .errors import ImportFailure, too_long
from .langpool import Analysis, LanguageDetector
from .readers import Doc, Pair
from .text import bound_sentence, split_sentences

logger = logging.getLogger(__name__)

SENTENCE_COLUMNS = ["id", "corpus_id", "document_id", "lang", "position", "text", "norm_hash", "detected_lang"]
SENTENCE_TYPES = ["int8", "int8", "int8", "text", "int4", "text", "int8", "text"]
DOCUMENT_COLUMNS = [
    "id",
    "corpus_id",
    "lang",
    "external_id",
    "url",
    "title",
    "metadata",
    "n_sentences",
    "host",
    "site",
    "crawled_at",
    "content_hash",
]
DOCUMENT_TYPES = [
    "int8",
    "int8",
    "text",
    "text",
    "text",
    "text",
    "jsonb",
    "int4",
    "text",
    "text",
    "timestamptz",
    "int8",
]
PAIR_COLUMNS = ["corpus_id", "src_id", "tgt_id"]
PAIR_TYPES = ["int8", "int8", "int8"]
MAX_EXTERNAL_ID = Document._meta.get_field("external_id").max_length
STAT_OF = {
    Document: "documents_written",
    Sentence: "sentences",
    GoldDocumentPair: "gold_document_pairs",
    GoldSentencePair: "gold_sentence_pairs",
}


class CorpusWriter:
    """Buffers rows and flushes them with COPY every `batch_size` sentences. No sentence longer than `max_chars`
    characters is written: a document's are cut at sentence or clause boundaries (counted in the stats as
    `long_sentences_split`), and anything that cannot be cut is an ImportFailure."""

    def __init__(
        self,
        corpus: Corpus,
        *,
        batch_size: int = 20_000,
        langid_workers: int = 2,
        progress: Callable[[int], None] | None = None,
        max_chars: int = 2000,
        check_existing: bool = True,
    ) -> None:
        """`check_existing=False`: the caller guarantees new (lang, external_id) keys (a crawl import checks its URLs
        against the corpus itself), so the corpus's keys are not loaded (memory then does not grow with it)."""
        self.corpus = corpus
        self.batch_size = batch_size
        self.max_chars = max_chars
        self.stats: dict[str, int] = {
            "documents": 0,
            "documents_written": 0,
            "sentences": 0,
            "gold_sentence_pairs": 0,
            "gold_document_pairs": 0,
            "skipped_empty_documents": 0,
            "skipped_empty_pairs": 0,
            "long_sentences_split": 0,
            "max_sentence_chars": max_chars,
        }
        self._progress = progress
        self._detector = LanguageDetector(langid_workers)
        self._sent_ids: list[int] = []
        self._sent_docs: list[int] = []
        self._sent_langs: list[str] = []
        self._sent_pos: list[int] = []
        self._sent_texts: list[str] = []
        self._sent_codes: list[str | None] = []
        self._sent_hashes: list[int | None] = []
        self._gold: list[tuple[int, int]] = []
        self._doc_rows: list[tuple] = []
        self._free_ids: list[int] = []  # reserved sentence ids, the next one last
        self._doc_ids = np.empty(0, dtype=np.int64)
        self._languages: set[str] = set(corpus.languages)
        self._doc_sizes: dict[int, int] = {}
        self._gold_docs: list[tuple[int, int, int]] = []
        self._copier = ThreadPoolExecutor(max_workers=1, thread_name_prefix="import-copy")
        self._pending: Future | None = None
        # (analysis to wait for, sentence columns, gold pairs) of the batch whose language ids are being computed
        self._lang_pending: tuple[Callable[[], Analysis], tuple[list, ...], list[tuple[int, int]]] | None = None
        self._check_existing = check_existing
        self._existing_docs: set[tuple[str, str]] = (
            set(Document.objects.filter(corpus=corpus).values_list("lang", "external_id").iterator(chunk_size=10_000))
            if check_existing
            else set()
        )

    # -- documents -------------------------------------------------------------------------------------------
    def new_document(
        self,
        lang: str,
        external_id: str,
        *,
        title: str = "",
        url: str = "",
        metadata: dict | None = None,
        n_sentences: int = 0,
        crawl: tuple[str, str, object, int | None] = ("", "", None, None),
    ) -> int:
        """Reserve a document id and buffer its row; raises if (lang, external_id) already exists in the corpus.

        `crawl`: (host, site, crawled_at, content_hash) of a crawled page."""
        if len(external_id) > MAX_EXTERNAL_ID:
            raise ImportFailure(
                f"the document name '{external_id[:60]}...' is {len(external_id):,} characters, over the "
                f"{MAX_EXTERNAL_ID} a name may have"
            )
        key = (lang, external_id)
        if self._check_existing:
            if key in self._existing_docs:
                where = f"corpus '{self.corpus.name}'"
                raise ImportFailure(f"document '{external_id}' [{lang}] appears twice (or already exists in {where})")
            self._existing_docs.add(key)
        if len(self._doc_ids) == 0:
            self._doc_ids = reserve_ids(Document, 256)
        doc_id, self._doc_ids = int(self._doc_ids[0]), self._doc_ids[1:]
        self._doc_rows.append(
            (doc_id, self.corpus.pk, lang, external_id, url, title, metadata or {}, n_sentences, *crawl)
        )
        self._languages.add(lang)
        self.stats["documents"] += 1
        return doc_id

    def add_sentence(self, doc_id: int, lang: str, position: int, text: str, *, detected: str | None = None) -> int:
        """Buffer one sentence; returns its (reserved) id. `detected`: its language when the reader identified it
        already (crawl pages), else the batch's language id finds it."""
        if not self._free_ids:
            self._reserve_sentence_ids(self.batch_size)
        sid = self._free_ids.pop()
        self._sent_ids.append(sid)
        self._sent_docs.append(doc_id)
        self._sent_langs.append(lang)
        self._sent_pos.append(position)
        self._sent_texts.append(text)
        self._sent_codes.append(detected)
        self._sent_hashes.append(None)
        if len(self._sent_ids) >= self.batch_size:
            self.flush()
        return sid

    def _reserve_sentence_ids(self, n: int) -> None:
        """Take `n` more sentence ids; the ones already held are used first (ascending ids append to the indexes)."""
        self._free_ids = reserve_ids(Sentence, n).tolist()[::-1] + self._free_ids

    # -- whole inputs ----------------------------------------------------------------------------------------
    def write_pairs(
        self,
        pairs: Iterable[Pair],
        *,
        src_lang: str,
        tgt_lang: str,
        name: str,
        src_doc: int | None = None,
        src_seen: dict[str, int] | None = None,
    ) -> tuple[int, int]:
        """An aligned input as one source and one target document; every pair becomes a gold sentence pair.

        `src_doc` and `src_seen` let several catalogues share one source document whose repeated sentences (same
        key) are stored once. Returns the two document ids.
        """
        if src_doc is None:
            src_doc = self.new_document(src_lang, name)
        tgt_doc = self.new_document(tgt_lang, name)
        seen = src_seen if src_seen is not None else {}
        positions = {src_doc: len(seen), tgt_doc: 0}
        unreported = 0
        max_chars = self.max_chars
        for pair in pairs:
            if not pair.src.strip() or not pair.tgt.strip():
                self.stats["skipped_empty_pairs"] += 1
                continue
            if len(pair.src) > max_chars or len(pair.tgt) > max_chars:  # the readers name the line first
                longer = max(len(pair.src), len(pair.tgt))
                raise ImportFailure(too_long(f"a sentence of '{name}'", longer, max_chars), path=None)
            src_id = seen.get(pair.src_key) if pair.src_key is not None else None
            if src_id is None:
                src_id = self.add_sentence(src_doc, src_lang, positions[src_doc], pair.src)
                positions[src_doc] += 1
                if pair.src_key is not None:
                    seen[pair.src_key] = src_id
            tgt_id = self.add_sentence(tgt_doc, tgt_lang, positions[tgt_doc], pair.tgt)
            positions[tgt_doc] += 1
            self._gold.append((src_id, tgt_id))
            unreported += 1
            if unreported == 1000 and self._progress:
                self._progress(unreported)
                unreported = 0
        if unreported and self._progress:
            self._progress(unreported)
        self._doc_sizes[src_doc] = positions[src_doc]
        self._doc_sizes[tgt_doc] = positions[tgt_doc]
        self._gold_docs.append((self.corpus.pk, src_doc, tgt_doc))
        return src_doc, tgt_doc

    def write_documents(self, docs: Iterable[Doc]) -> None:
        """Documents split into sentences (unless pre-split); empty ones are skipped and counted. Documents that
        share an id across languages are recorded as gold document pairs."""
        by_id: dict[str, list[tuple[str, int]]] = {}
        for doc in docs:
            sentences = doc.sentences if doc.sentences is not None else split_sentences(doc.text or "", doc.lang)
            sentences = [s for s in sentences if s.strip()]
            if not sentences:
                self.stats["skipped_empty_documents"] += 1
                continue
            if len(doc.external_id) > MAX_EXTERNAL_ID:
                raise ImportFailure(
                    f"the id is {len(doc.external_id):,} characters, over the {MAX_EXTERNAL_ID} an id may have",
                    path=doc.path,
                    line=doc.line,
                )
            if any(len(s) > self.max_chars for s in sentences):
                sentences = self._bounded(doc, sentences)
            doc_id = self.new_document(
                doc.lang,
                doc.external_id,
                title=doc.title,
                url=doc.url,
                metadata=doc.metadata,
                n_sentences=len(sentences),
            )
            for pos, text in enumerate(sentences):
                self.add_sentence(doc_id, doc.lang, pos, text)
            by_id.setdefault(doc.external_id, []).append((doc.lang, doc_id))
            if self._progress:
                self._progress(1)
        for versions in by_id.values():
            for i, (lang_a, a) in enumerate(versions):
                for lang_b, b in versions[i + 1 :]:
                    if lang_a != lang_b:
                        self._gold_docs.append((self.corpus.pk, a, b))

    def write_page(self, page: CrawlPage) -> int:
        """One crawled page (its sentences already split and bounded) as a document; returns its id."""
        doc_id = self.new_document(
            page.lang,
            page.external_id,
            title=page.title,
            url=page.url,
            metadata=page.metadata,
            n_sentences=len(page.sentences),
            crawl=(page.host, page.site, page.crawled_at, page.content_hash),
        )
        n = len(page.sentences)
        codes = page.detected if len(page.detected) == n else [None] * n
        hashes = page.hashes if len(page.hashes) == n else [None] * n
        at = 0
        while at < n:  # the page's sentences in runs that fit the batch, so a flush falls between runs
            room = self.batch_size - len(self._sent_ids)
            end = min(n, at + room)
            if len(self._free_ids) < end - at:
                self._reserve_sentence_ids(self.batch_size)
            take = self._free_ids[len(self._free_ids) - (end - at) :][::-1]
            del self._free_ids[len(self._free_ids) - (end - at) :]
            self._sent_ids += take
            self._sent_docs += [doc_id] * (end - at)
            self._sent_langs += [page.lang] * (end - at)
            self._sent_pos += range(at, end)
            self._sent_texts += page.sentences[at:end]
            self._sent_codes += codes[at:end]
            self._sent_hashes += hashes[at:end]
            at = end
            if len(self._sent_ids) >= self.batch_size:
                self.flush()
        return doc_id

    def _bounded(self, doc: Doc, sentences: list[str]) -> list[str]:
        """The document's sentences with each one over `max_chars` cut at sentence or clause boundaries."""
        out: list[str] = []
        for sentence in sentences:
            if len(sentence) <= self.max_chars:
                out.append(sentence)
                continue
            pieces = bound_sentence(sentence, doc.lang, self.max_chars)
            if pieces is None:
                raise ImportFailure(
                    too_long("a sentence", len(sentence), self.max_chars)
                    + ", and it has no sentence or clause boundary to cut it at: split it in the file or raise the "
                    f"limit (it starts '{sentence[:40]}')",
                    path=doc.path,
                    line=doc.line,
                    element=f"document '{doc.external_id[:80]}' [{doc.lang}]",
                )
            self.stats["long_sentences_split"] += 1
            out += pieces
        return out

    # -- flushing --------------------------------------------------------------------------------------------
    def flush(self, *, final: bool = False) -> None:
        """Hand what is buffered to the COPY thread (documents, sentences with language ids, gold pairs), so the
        server writes and checks one batch while this process reads and prepares the next."""
        batch: list[tuple[type, list[str], list, list[str]]] = []
        if self._doc_rows:
            batch.append((Document, DOCUMENT_COLUMNS, self._doc_rows, DOCUMENT_TYPES))
            self._doc_rows = []
        # Language ids of this batch are computed in the workers while the next batch is read: its sentences go out
        # one flush later, and its gold pairs with them (foreign keys are checked as each COPY ends, and a gold pair
        # refers to sentences of its own batch or earlier ones).
        if self._lang_pending is not None:
            analysis, columns, gold = self._lang_pending
            self._lang_pending = None
            batch += self._sentence_parts(columns, analysis(), gold)
        gold, self._gold = self._gold, []
        if self._sent_ids:
            known = self._sent_codes if all(c is not None for c in self._sent_codes) else None
            hashes = self._sent_hashes if all(h is not None for h in self._sent_hashes) else None
            analysis = self._detector.submit(self._sent_texts, codes=known, hashes=hashes)
            columns = (self._sent_ids, self._sent_docs, self._sent_langs, self._sent_pos, self._sent_texts)
            self._sent_ids, self._sent_docs, self._sent_langs, self._sent_pos, self._sent_texts = [], [], [], [], []
            self._sent_codes, self._sent_hashes = [], []
            if final:
                batch += self._sentence_parts(columns, analysis(), gold)
            else:
                self._lang_pending = (analysis, columns, gold)
        elif gold:
            batch += self._sentence_parts(None, None, gold)
        if self._gold_docs:
            batch.append((GoldDocumentPair, PAIR_COLUMNS, self._gold_docs, PAIR_TYPES))
            self._gold_docs = []
        self._wait()
        if len(self._free_ids) < self.batch_size:  # refill while no COPY holds the connection
            self._reserve_sentence_ids(self.batch_size - len(self._free_ids))
        if batch:
            raw = connection.connection
            self._pending = self._copier.submit(_copy_batch, raw, batch)

    def _sentence_parts(
        self, columns: tuple[list, ...] | None, analysis: Analysis | None, gold: list[tuple[int, int]]
    ) -> list[tuple[type, list[str], list, list[str]]]:
        """COPY parts for a batch of sentences with their language ids and hashes, then the gold pairs that refer
        to them."""
        parts = []
        if columns is not None and analysis is not None:
            ids, docs, langs, positions, texts = columns
            codes, hashes = analysis
            rows = list(
                zip(ids, repeat(self.corpus.pk, len(ids)), docs, langs, positions, texts, hashes, codes, strict=True)
            )
            parts.append((Sentence, SENTENCE_COLUMNS, rows, SENTENCE_TYPES))
        if gold:
            cid = self.corpus.pk
            parts.append((GoldSentencePair, PAIR_COLUMNS, [(cid, s, t) for s, t in gold], PAIR_TYPES))
        return parts

    def _wait(self) -> None:
        """Wait for the COPY in flight (re-raising its error) and count what it wrote."""
        if self._pending is not None:
            written = self._pending.result()
            self._pending = None
            for model, n in written:
                self.stats[STAT_OF[model]] += n

    def finish(self) -> dict[str, int]:
        """Flush the rest, fix aligned documents' sentence counts and the corpus's languages; returns the stats."""
        self.flush(final=True)
        self._wait()
        self._detector.close()
        for doc_id, n in self._doc_sizes.items():
            Document.objects.filter(pk=doc_id).update(n_sentences=n)
        Corpus.objects.filter(pk=self.corpus.pk).update(languages=sorted(self._languages))
        return self.stats

    def close(self) -> None:
        """Release the helpers; after an error, wait for a COPY in flight so the rollback finds the line free."""
        try:
            self._wait()
        except Exception:  # the import is failing already; its first error is the one reported
            pass
        self._copier.shutdown(wait=True)
        self._detector.close()


def _copy_batch(raw, batch: list[tuple[type, list[str], list, list[str]]]) -> list[tuple[type, int]]:
    """COPY each part of a batch on the raw connection (in the import's transaction); runs in the COPY thread."""
    out = []
    with raw.cursor() as cur:
        for model, columns, rows, types in batch:
            cols = ", ".join(f'"{c}"' for c in columns)
            with cur.copy(f'COPY "{model._meta.db_table}" ({cols}) FROM STDIN (FORMAT BINARY)') as copy:
                copy.set_types(types)
                for row in rows:
                    copy.write_row(row)
            out.append((model, len(rows)))
    return out
