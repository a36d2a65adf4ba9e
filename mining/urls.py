"""Page URLs of the mining app; each views module owns its own `urlpatterns`."""

from .views import dashboard, imports, runs

urlpatterns = [*dashboard.urlpatterns, *imports.urlpatterns, *runs.urlpatterns]
