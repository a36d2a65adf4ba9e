"""Review and campaign pages (mounted at /review/)."""

from django.urls import path

from .views import results, review

urlpatterns = [
    path("", review.campaign_list, name="campaign-list"),
    path("campaigns/new/", review.campaign_new, name="campaign-new"),
    path("campaigns/<int:pk>/", review.review, name="campaign-review"),
    path("campaigns/<int:pk>/label/", review.label, name="campaign-label"),
    path("campaigns/<int:pk>/undo/", review.undo, name="campaign-undo"),
    path("campaigns/<int:pk>/history/<int:n>/", review.history_item, name="campaign-history"),
    path("campaigns/<int:pk>/results/", results.results, name="campaign-results"),
    path("campaigns/<int:pk>/labels.<str:fmt>", results.export_labels, name="campaign-labels"),
    path("document-pairs/<int:pk>/", results.document_pair, name="document-pair"),
    path("runs/<int:run_pk>/check-estimate/", review.check_estimate, name="run-check-estimate"),
]
