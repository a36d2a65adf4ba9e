"""Corpus upload pages (staff only)."""

urlpatterns: list = []
