"""REST API URLs; each api module owns its own `urlpatterns`."""

from django.urls import path

from . import candidates, corpora, export, imports, runs

urlpatterns: list = [
    path("corpora/", corpora.CorpusListApi.as_view(), name="api-corpus-list"),
    path("corpora/<int:pk>/", corpora.CorpusDetailApi.as_view(), name="api-corpus-detail"),
    path("corpora/import/", imports.ImportCreateApi.as_view(), name="api-import-create"),
    path("imports/<int:pk>/", imports.ImportDetailApi.as_view(), name="api-import-detail"),
    path("imports/<int:pk>/retry/", imports.ImportRetryApi.as_view(), name="api-import-retry"),
    path("runs/", runs.RunListCreateApi.as_view(), name="api-run-list"),
    path("runs/<int:pk>/", runs.RunDetailApi.as_view(), name="api-run-detail"),
    path("runs/<int:pk>/cancel/", runs.RunCancelApi.as_view(), name="api-run-cancel"),
    path("runs/<int:pk>/retry/", runs.RunRetryApi.as_view(), name="api-run-retry"),
    path("runs/<int:pk>/histogram/", runs.RunHistogramApi.as_view(), name="api-run-histogram"),
    path("runs/<int:pk>/candidates/", candidates.CandidateListApi.as_view(), name="api-candidate-list"),
    path("runs/<int:pk>/export/", export.RunExportApi.as_view(), name="api-run-export"),
    path("runs/<int:pk>/exports/", export.RunExportFilesApi.as_view(), name="api-run-export-files"),
]
