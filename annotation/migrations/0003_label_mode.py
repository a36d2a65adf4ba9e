# Labels record how they came about: a campaign item handed to its reviewer, or a staff review outside campaigns.
# Labels made outside campaigns before this rule are marked 'staff' when their author is staff and 'unchecked'
# otherwise; 'unchecked' labels are kept out of every estimate and of training (annotation.selectors.estimable_labels).

from django.conf import settings
from django.db import migrations, models


def mark_labels_outside_campaigns(apps, schema_editor):
    Label = apps.get_model("annotation", "Label")
    outside = Label.objects.filter(campaign__isnull=True)
    outside.filter(reviewer__is_staff=True).update(mode="staff")
    outside.exclude(reviewer__is_staff=True).update(mode="unchecked")


class Migration(migrations.Migration):
    dependencies = [
        ("annotation", "0002_item_sampler_uncertain"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="label",
            name="mode",
            field=models.CharField(
                choices=[
                    ("campaign", "A campaign item handed to its reviewer by the queue"),
                    ("staff", "Staff review of a pair outside campaigns"),
                    ("unchecked", "Made outside campaigns before this rule (kept out of estimates and training)"),
                ],
                default="campaign",
                max_length=16,
            ),
        ),
        migrations.RunPython(mark_labels_outside_campaigns, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="label",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("campaign__isnull", False), ("item__isnull", False), ("mode", "campaign")),
                    models.Q(("campaign__isnull", True), ("item__isnull", True), ("mode__in", ["staff", "unchecked"])),
                    _connector="OR",
                ),
                name="label_campaign_or_staff",
            ),
        ),
    ]
