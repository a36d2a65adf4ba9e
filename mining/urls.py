"""Page URLs of the mining app; each views module owns its own `urlpatterns`."""

from .views import corpora, export, imports, results, runs

urlpatterns = [
    *corpora.urlpatterns,
    *imports.urlpatterns,
    *runs.urlpatterns,
    *results.urlpatterns,
    *export.urlpatterns,
]
