"""Page URLs of the feedback app (the calibration page of a language pair and its actions)."""

from django.urls import path

from .views import calibration_apply_view, calibration_fine_tune, calibration_page, calibration_train, feedback_index

urlpatterns = [
    path("feedback/", feedback_index, name="feedback"),
    path("calibration/<str:src>-<str:tgt>/", calibration_page, name="calibration"),
    path("calibration/<str:src>-<str:tgt>/train/", calibration_train, name="calibration-train"),
    path("calibration/<str:src>-<str:tgt>/apply/", calibration_apply_view, name="calibration-apply"),
    path("calibration/<str:src>-<str:tgt>/fine-tune/", calibration_fine_tune, name="calibration-fine-tune"),
]
