"""Review API URLs (mounted at /api/review/)."""

from django.urls import path

from .api import CampaignCreateApi, CampaignLabelsApi, CampaignResultsApi, JudgementCreateApi

urlpatterns = [
    path("judgements/", JudgementCreateApi.as_view(), name="api-judgement-create"),
    path("campaigns/", CampaignCreateApi.as_view(), name="api-campaign-create"),
    path("campaigns/<int:pk>/results/", CampaignResultsApi.as_view(), name="api-campaign-results"),
    path("campaigns/<int:pk>/labels/", CampaignLabelsApi.as_view(), name="api-campaign-labels"),
]
