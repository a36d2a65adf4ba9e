"""Page URLs of the mining app; each views module owns its own `urlpatterns`."""

from .views import dashboard, export, imports, results, runs

urlpatterns = [
    *dashboard.urlpatterns,
    *imports.urlpatterns,
    *runs.urlpatterns,
    *results.urlpatterns,
    *export.urlpatterns,
]
