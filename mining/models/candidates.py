"""Sentence-pair and document-pair candidates. Written in bulk with binary COPY (see mining/copy.py).

Labels and campaign items refer to sentence-pair candidates through statement-level triggers rather than a
foreign-key constraint, so that deleting a run's million candidates is one DELETE, not a million checks (see
annotation/migrations/0004_sentence_pair_statement_guard.py).
"""

from django.db import models


class SentencePairCandidate(models.Model):
    """A candidate translation pair found by a run, with the evidence for its score.

    The review app depends on this table below the ORM: its migration 0004 installs triggers on it
    (``sentence_pairs_deleted``, ``sentence_pairs_truncated``, ``sentence_pair_id_changed``) that stand in for the
    foreign keys of labels and campaign items. Renaming the table or its ``id`` needs an annotation migration that
    re-creates them (tests/annotation/test_candidate_guard.py pins them to this model's table). The apps above read
    the table through mining's models and ``mining.selectors.samples``, never by naming it in SQL.
    """

    run = models.ForeignKey("mining.MiningRun", on_delete=models.CASCADE, related_name="sentence_pairs", db_index=False)
    src = models.ForeignKey("mining.Sentence", on_delete=models.CASCADE, related_name="+", db_index=False)
    tgt = models.ForeignKey("mining.Sentence", on_delete=models.CASCADE, related_name="+", db_index=False)
    cosine = models.FloatField()
    score = models.FloatField(help_text="Margin score (or the aligner's score).")
    confidence = models.FloatField(null=True, blank=True, help_text="Calibrated P(GOOD).")
    calibration = models.ForeignKey(
        "mining.Artefact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    rank = models.IntegerField(help_text="1 = best score in the run.")
    strategy = models.CharField(max_length=16, blank=True)
    filter_reason = models.CharField(max_length=32, blank=True, help_text="Pre-filter rule that fired, if any.")
    doc_pair = models.ForeignKey(
        "mining.DocumentPairCandidate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="sentence_pairs",
        db_index=False,
        help_text="For alignment runs: the document pair this pair came from.",
    )
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "src", "tgt"], name="sent_cand_unique_pair"),
        ]
        indexes = [
            models.Index(fields=["run", "rank"], name="sent_cand_run_rank"),
            models.Index(fields=["run", "-score"], name="sent_cand_run_score"),
            # Deleting document pairs checks the alignment candidates that point at them: without an index, each
            # deleted document pair scanned the whole table. Partial: sentence runs leave doc_pair empty.
            models.Index(fields=["doc_pair"], name="sent_cand_doc_pair", condition=models.Q(doc_pair__isnull=False)),
            # Deleting a sentence checks the candidates that point at it (src or tgt): without these, each deleted
            # sentence scanned the (run, src, tgt) index of every run (27.5 ms a check), and deleting a corpus took
            # minutes per thousand sentences while other runs' workers waited on its locks.
            models.Index(fields=["src"], name="sent_cand_src"),
            models.Index(fields=["tgt"], name="sent_cand_tgt"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}: {self.src_id} -> {self.tgt_id} ({self.score:.3f})"


class DocumentPairCandidate(models.Model):
    """A candidate translation pair of documents found by a document-matching run."""

    run = models.ForeignKey("mining.MiningRun", on_delete=models.CASCADE, related_name="document_pairs", db_index=False)
    src = models.ForeignKey("mining.Document", on_delete=models.CASCADE, related_name="+", db_index=False)
    tgt = models.ForeignKey("mining.Document", on_delete=models.CASCADE, related_name="+", db_index=False)
    cosine = models.FloatField()
    score = models.FloatField()
    confidence = models.FloatField(null=True, blank=True)
    rank = models.IntegerField()
    strategy = models.CharField(max_length=16, blank=True)
    filter_reason = models.CharField(max_length=32, blank=True)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "src", "tgt"], name="doc_cand_unique_pair"),
        ]
        indexes = [
            models.Index(fields=["run", "rank"], name="doc_cand_run_rank"),
            models.Index(fields=["run", "-score"], name="doc_cand_run_score"),
            models.Index(fields=["src"], name="doc_cand_src"),  # deleting a document checks these (see above)
            models.Index(fields=["tgt"], name="doc_cand_tgt"),
        ]

    def __str__(self) -> str:
        return f"run {self.run_id}: doc {self.src_id} -> {self.tgt_id} ({self.score:.3f})"
