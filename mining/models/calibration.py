"""Per-language-pair decisions of the feedback loop: the applied threshold and calibration model."""

from django.conf import settings
from django.db import models


class LanguagePairSetting(models.Model):
    """The threshold on the pair score chosen for a language pair on the calibration page (with the calibration model
    current then). The uncertain sampler maps it to the calibrated-confidence scale of each run at equal yield."""

    src_lang = models.CharField(max_length=16)
    tgt_lang = models.CharField(max_length=16)
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
        constraints = [models.UniqueConstraint(fields=["src_lang", "tgt_lang"], name="one_setting_per_pair")]

    def __str__(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang} >= {self.threshold:.3f}"
