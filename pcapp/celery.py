"""The Celery app, configured from Django's settings (CELERY_ namespace)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pcapp.settings")

app = Celery("pcapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# The task that executes runs of every kind lives in pcapp.jobs (it maps kinds of several apps to their handlers).
app.autodiscover_tasks(["pcapp"], related_name="jobs")
