from django.apps import AppConfig


class MiningConfig(AppConfig):
    name = "mining"
    verbose_name = "Corpora and mining"
