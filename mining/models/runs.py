"""Mining runs (sentence mining, document matching, alignment, training) and their shards."""

from django.db import models

from .jobs import Job, JobStatus

__all__ = ["JobStatus", "MiningRun", "RunKind", "RunShard"]


class RunKind(models.TextChoices):
    SENTENCE = "sentence", "Sentence mining"
    DOCUMENT = "document", "Document matching"
    ALIGN = "align", "Sentence alignment in matched documents"
    TRAIN_ENCODER = "train_encoder", "Train sentence encoder"
    TRAIN_DOC_MODEL = "train_doc_model", "Train document model"
    CALIBRATE = "calibrate", "Train calibration model"
    APPLY_CALIBRATION = "apply_calibration", "Apply calibration to a run"
    FINE_TUNE = "fine_tune", "Fine-tune encoder from reviews"
    SELF_TRAIN = "self_train", "Self-train an encoder on the corpus (no gold pairs)"


class MiningRun(Job):
    """One unit of background work with its parameters, live progress, timings and outcome."""

    kind = models.CharField(max_length=32, choices=RunKind.choices)
    name = models.CharField(max_length=200, blank=True)
    src_corpus = models.ForeignKey(
        "mining.Corpus", null=True, blank=True, on_delete=models.CASCADE, related_name="runs_as_src"
    )
    tgt_corpus = models.ForeignKey(
        "mining.Corpus", null=True, blank=True, on_delete=models.CASCADE, related_name="runs_as_tgt"
    )
    src_lang = models.CharField(max_length=16, blank=True)
    tgt_lang = models.CharField(max_length=16, blank=True)
    encoder = models.ForeignKey("mining.Artefact", null=True, blank=True, on_delete=models.PROTECT, related_name="runs")
    parent = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="children",
        help_text="The run this one builds on (e.g. the document run an alignment run aligns).",
    )
    params = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "kind"], name="run_status_kind")]

    def __str__(self) -> str:
        return self.name or f"{self.get_kind_display()} #{self.pk}"


class RunShard(models.Model):
    """One piece of a run's work (a stage's shard): held by a worker under a lease while it runs, done once
    `finished_at` is set. A re-run skips done shards; a shard whose lease expired is taken over."""

    run = models.ForeignKey(MiningRun, on_delete=models.CASCADE, related_name="shards")
    stage = models.CharField(max_length=64)
    shard_no = models.IntegerField()
    result = models.JSONField(default=dict, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, help_text="The worker process holding it (host:pid).")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="Set when the shard's output is complete.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "stage", "shard_no"], name="run_shard_unique"),
        ]
