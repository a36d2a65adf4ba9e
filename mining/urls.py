"""Page URLs of the mining app; each views module owns its own `urlpatterns`."""

from .views import export, imports, results, runs

urlpatterns = [
    *imports.urlpatterns,
    *runs.urlpatterns,
    *results.urlpatterns,
    *export.urlpatterns,
]
