"""Versioned trained artefacts (encoders, document models, calibration heads) stored as files."""

from django.conf import settings
from django.db import models


class ArtefactKind(models.TextChoices):
    ENCODER = "encoder", "Sentence encoder"
    DOC_MODEL = "doc_model", "Document model"
    CALIBRATION = "calibration", "Calibration model"
    EMBEDDINGS = "embeddings", "Embeddings"
    INDEX = "index", "kNN index"


class Artefact(models.Model):
    """A model or file the app uses; `path` is relative to PCAPP_DATA_DIR (empty for built-in encoders)."""

    kind = models.CharField(max_length=16, choices=ArtefactKind.choices)
    name = models.CharField(max_length=200, help_text="Registry name, e.g. 'usem3', 'dan', 'local'.")
    version = models.PositiveIntegerField(default=1)
    path = models.TextField(blank=True)
    src_lang = models.CharField(max_length=16, blank=True)
    tgt_lang = models.CharField(max_length=16, blank=True)
    params = models.JSONField(default=dict, blank=True)
    metrics = models.JSONField(default=dict, blank=True)
    trained_on = models.ForeignKey("mining.Corpus", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["kind", "name", "version"], name="artefact_unique_version"),
        ]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"
