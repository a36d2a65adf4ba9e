"""Review and campaign pages."""

urlpatterns: list = []
