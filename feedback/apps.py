from django.apps import AppConfig


class FeedbackConfig(AppConfig):
    """The feedback loop: reviewers' labels train calibration models, set thresholds and fine-tune encoders."""

    name = "feedback"
    verbose_name = "Feedback: calibration and fine-tuning"
