"""Corpora, documents, sentences, gold alignments and import jobs."""

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from .jobs import Job


class Corpus(models.Model):
    """A named collection of documents in one or more languages."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    languages = ArrayField(models.CharField(max_length=16), default=list)
    source = models.CharField(max_length=500, blank=True, help_text="Where the text came from.")
    stats = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    deleting = models.BooleanField(
        default=False,
        help_text="Being deleted (in batches): no run or import may start on it; delete it again to finish.",
    )

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "corpora"

    def __str__(self) -> str:
        return self.name


class Document(models.Model):
    """One document in one language; `external_id` is shared by translations where the source has one."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="documents")
    lang = models.CharField(max_length=16)
    external_id = models.CharField(max_length=500)
    url = models.TextField(blank=True)
    title = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    n_sentences = models.PositiveIntegerField(default=0)
    # Crawled pages (WARC, WET, saved HTML): where and when the page was, for matching within a site.
    host = models.CharField(max_length=255, blank=True, help_text="The URL's host (crawled pages).")
    site = models.CharField(max_length=255, blank=True, help_text="The URL's registered domain (crawled pages).")
    crawled_at = models.DateTimeField(null=True, blank=True)
    content_hash = models.BigIntegerField(null=True, blank=True, help_text="Hash of the main text, for dedup.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["corpus", "lang", "external_id"], name="document_unique_ext_id"),
        ]
        indexes = [
            models.Index(fields=["corpus", "lang"], name="document_corpus_lang"),
            models.Index(fields=["corpus", "site", "lang"], name="document_corpus_site_lang"),
        ]

    def __str__(self) -> str:
        return f"{self.external_id} [{self.lang}]"


class Sentence(models.Model):
    """A sentence of a document; `text` is stored exactly as given."""

    # `corpus` copies document.corpus for the (corpus, lang, id) index. It has no database constraint of its own:
    # sentence -> document -> corpus already guarantees the corpus exists, and a second deferred check per row was
    # a quarter of the server's time in an import. Deleting a corpus still cascades (Django collects the rows).
    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False)
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="sentences", db_index=False)
    lang = models.CharField(max_length=16)
    position = models.PositiveIntegerField()
    text = models.TextField()
    norm_hash = models.BigIntegerField(help_text="Hash of the normalised text, for dedup.")
    detected_lang = models.CharField(max_length=16, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document", "position"], name="sentence_unique_position"),
        ]
        indexes = [
            models.Index(fields=["corpus", "lang", "id"], name="sentence_corpus_lang_id"),
        ]
        # No index on norm_hash: dedup runs over a side's rows in the mining job, and every extra index on this
        # table slows the bulk COPY of imports (see bench/import_bench.py).

    def __str__(self) -> str:
        return self.text[:80]


class GoldDocumentPair(models.Model):
    """A known translation between two documents, from the import."""

    corpus = models.ForeignKey(Corpus, on_delete=models.CASCADE, related_name="gold_document_pairs")
    src = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")
    tgt = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["src", "tgt"], name="gold_doc_pair_unique")]


class GoldSentencePair(models.Model):
    """A known translation between two sentences (TSV, Moses, TMX and PO imports record these)."""

    # As on Sentence: `corpus` is a copy (of src.corpus) without a constraint of its own; src and tgt are checked.
    corpus = models.ForeignKey(
        Corpus, on_delete=models.CASCADE, related_name="gold_sentence_pairs", db_index=False, db_constraint=False
    )
    # No index of its own on src: the unique (src, tgt) index serves lookups by src.
    src = models.ForeignKey(Sentence, on_delete=models.CASCADE, related_name="+", db_index=False)
    tgt = models.ForeignKey(Sentence, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["src", "tgt"], name="gold_sent_pair_unique")]
        indexes = [models.Index(fields=["corpus", "id"], name="gold_sent_corpus_id")]


class ImportJob(Job):
    """One corpus import: all or nothing, with progress."""

    class Format(models.TextChoices):
        TSV = "tsv", "TSV (two columns)"
        MOSES = "moses", "Moses (two aligned files)"
        TMX = "tmx", "TMX 1.4"
        JSONL = "jsonl", "JSONL documents"
        FOLDER = "folder", "Folder of plain-text documents"
        PO = "po", "gettext PO"
        WARC = "warc", "Web crawl: WARC / WARC.gz / WET files"
        HTML = "html", "Web crawl: folder of saved HTML pages"

    corpus_name = models.CharField(max_length=200)
    corpus = models.ForeignKey(Corpus, null=True, blank=True, on_delete=models.SET_NULL, related_name="imports")
    format = models.CharField(max_length=16, choices=Format.choices)
    paths = ArrayField(models.TextField(), default=list)
    options = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"import {self.corpus_name} ({self.format}, {self.status})"


class ImportPart(Job):
    """One file of a crawl import (a WARC file, or the folder of saved pages): imported in a transaction of its own,
    by whichever worker claims it, so several workers share a large crawl."""

    job = models.ForeignKey(ImportJob, on_delete=models.CASCADE, related_name="parts")
    part_no = models.PositiveIntegerField()
    path = models.TextField()

    class Meta:
        ordering = ["job", "part_no"]
        constraints = [models.UniqueConstraint(fields=["job", "part_no"], name="import_part_unique")]

    def __str__(self) -> str:
        return f"import {self.job_id} part {self.part_no} ({self.status})"
