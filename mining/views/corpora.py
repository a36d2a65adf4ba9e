"""Corpus pages: the list, one corpus (languages, counts, imports, runs, gold pairs) and its deletion (staff)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import path
from django.views.decorators.http import require_GET, require_http_methods

from pcapp.permissions import staff_required

from ..models import Corpus
from ..selectors import corpus_detail, corpus_list
from ..services.corpora import corpus_delete, corpus_deletion_preview


def _corpus_or_404(pk: int) -> Corpus:
    corpus = Corpus.objects.filter(pk=pk).first()
    if corpus is None:
        raise Http404("no such corpus")
    return corpus


@require_GET
@staff_required
def corpus_index(request: HttpRequest) -> HttpResponse:
    """Every corpus with its languages and counts."""
    return render(request, "mining/corpus_list.html", {"corpora": corpus_list()})


@require_GET
@staff_required
def corpus_page(request: HttpRequest, pk: int) -> HttpResponse:
    """One corpus: per-language counts, its imports, the runs that read it and a few of its gold pairs."""
    return render(request, "mining/corpus_detail.html", corpus_detail(corpus=_corpus_or_404(pk)))


@require_http_methods(["GET", "POST"])
@staff_required
def corpus_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    """GET: what deleting the corpus removes, and a confirmation form; POST (with confirm=yes): delete it."""
    corpus = _corpus_or_404(pk)
    if request.method == "POST":
        if request.POST.get("confirm") != "yes":
            messages.error(request, "Tick the box to confirm the deletion.")
            return redirect("corpus-delete", pk=corpus.pk)
        name = corpus.name
        try:
            removed = corpus_delete(corpus=corpus)
        except ValueError as exc:
            messages.error(request, str(exc))
            return redirect("corpus-detail", pk=pk)
        messages.success(
            request,
            f"Corpus '{name}' deleted with {removed.sentences} sentences and {removed.runs} run"
            f"{'' if removed.runs == 1 else 's'}.",
        )
        return redirect("corpus-list")
    preview = corpus_deletion_preview(corpus=corpus)
    return render(request, "mining/corpus_delete.html", {"corpus": corpus, "preview": preview})


urlpatterns = [
    path("corpora/", corpus_index, name="corpus-list"),
    path("corpora/<int:pk>/", corpus_page, name="corpus-detail"),
    path("corpora/<int:pk>/delete/", corpus_delete_view, name="corpus-delete"),
]
