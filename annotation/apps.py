from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Review and campaigns"

    def ready(self) -> None:
        """Give mining's results the reviewers' labels (mining never imports this app: it asks a provider)."""
        from mining.selectors.labels import provide_label_model

        from .models import Label

        provide_label_model(Label)
