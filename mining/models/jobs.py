"""The base of every long job (runs of every kind, corpus imports): status, stage, progress, error, timings, who and
when, cancel, and the lease of the worker that holds it. The allowed status changes are in mining.services.jobs."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class JobStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


FINISHED_STATUSES = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)
RETRYABLE_STATUSES = (JobStatus.FAILED, JobStatus.CANCELLED)


class Job(models.Model):
    """Abstract: one unit of background work with its live progress, timings and outcome."""

    status = models.CharField(max_length=16, choices=JobStatus.choices, default=JobStatus.PENDING)
    stage = models.CharField(max_length=64, blank=True)
    done = models.BigIntegerField(default=0, help_text="Units done in the current stage.")
    total = models.BigIntegerField(default=0, help_text="Units of the current stage (0: unknown).")
    progress = models.FloatField(
        default=0.0, help_text="Share of the whole job done, 0 to 1, over all its stages (1 when it succeeded)."
    )
    timings = models.JSONField(default=dict, blank=True, help_text="Seconds per finished stage.")
    stats = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    celery_task_id = models.CharField(max_length=64, blank=True)
    lease_owner = models.CharField(
        max_length=200, blank=True, help_text="The worker process holding the job (host:pid) while it runs."
    )
    lease_expires_at = models.DateTimeField(
        null=True, blank=True, help_text="The holder renews this while alive; past it, the job is stalled."
    )
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When it last became pending (created, or retried)."
    )
    enqueued_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When its task was published to the broker for this attempt; empty while it was not (yet).",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["-created_at"]

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def is_stalled(self) -> bool:
        """Running, but its worker stopped renewing the lease (killed, or its machine is gone)."""
        return (
            self.status == JobStatus.RUNNING
            and self.lease_expires_at is not None
            and self.lease_expires_at < timezone.now()
        )

    @property
    def state(self) -> str:
        """The status as the user should read it: "stalled" for a running job whose worker stopped renewing its
        lease, else the status."""
        return "stalled" if self.is_stalled else self.status

    @property
    def state_display(self) -> str:
        return "Stalled" if self.is_stalled else self.get_status_display()  # type: ignore[attr-defined]

    @property
    def can_cancel(self) -> bool:
        return not self.is_finished

    @property
    def can_retry(self) -> bool:
        return self.status in RETRYABLE_STATUSES or self.is_stalled
