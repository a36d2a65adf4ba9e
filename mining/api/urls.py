"""REST API URLs; each api module owns its own `urlpatterns`."""

urlpatterns: list = []
