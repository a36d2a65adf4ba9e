from django.apps import AppConfig
from django.apps import apps as global_apps
from django.db.models.signals import post_migrate


def _ensure_reviewers_group(sender: AppConfig, using: str = "default", apps=global_apps, **kwargs: object) -> None:
    """After every migrate (and every flush, which sends post_migrate too) the `reviewers` group exists, as its data
    migration made it: a flushed database (a test's) still offers the group in the admin. Skipped when the migrated
    state has no auth app (as Django's own create_permissions does)."""
    from pcapp.roles import REVIEWERS_GROUP

    try:
        group = apps.get_model("auth", "Group")
    except LookupError:
        return
    group.objects.using(using).get_or_create(name=REVIEWERS_GROUP)


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Review and campaigns"

    def ready(self) -> None:
        """Give mining's results the reviewers' labels (mining never imports this app: it asks a provider)."""
        from django.db.models import Q

        from mining.selectors.labels import provide_label_model

        from .models import Label, Sampler

        # Labels of campaign items drawn at random over the run (uniform) or over its kept set (the one-click check)
        # may settle the run's stated precision; controls, pairs near a threshold or picked by uncertainty may not.
        provide_label_model(
            Label, random_sample=Q(item__sampler__in=[Sampler.KEPT, Sampler.UNIFORM], item__is_control=False)
        )
        post_migrate.connect(_ensure_reviewers_group, sender=self, dispatch_uid="annotation-reviewers-group")
