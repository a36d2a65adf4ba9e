"""Mining run pages: start, live progress, results."""

urlpatterns: list = []
