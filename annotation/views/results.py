"""Campaign results (staff), label exports, and judging document pairs with their aligned sentences."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from mining.models import DocumentPairCandidate, SentencePairCandidate
from pcapp.permissions import reviewer_required, staff_required

from ..forms import PairLabelForm
from ..models import Campaign, Label
from ..selectors import campaign_results
from ..services import ReviewError, label_pair

EXPORT_FIELDS = ["campaign", "item", "run", "reviewer", "verdict", "reasons", "comment", "seconds_spent",
                 "is_control", "expected", "stratum", "stratum_size", "src", "tgt", "score", "created_at"]


@require_GET
@staff_required
def results(request: HttpRequest, pk: int) -> HttpResponse:
    """GOOD rate per run with its interval (side by side), agreement, controls, progress."""
    campaign = Campaign.objects.filter(pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign")
    return render(request, "annotation/results.html", {"campaign": campaign, "r": campaign_results(campaign)})


def _label_rows(campaign: Campaign) -> Iterator[dict]:
    qs = (Label.objects.filter(campaign=campaign).select_related("item__src", "item__tgt", "reviewer",
                                                                  "sentence_pair").order_by("id"))
    for lab in qs.iterator(chunk_size=2000):
        item = lab.item
        yield {"campaign": campaign.pk, "item": item.pk if item else None, "run": item.run_id if item else None,
               "reviewer": lab.reviewer.get_username(), "verdict": lab.verdict, "reasons": ";".join(lab.reasons),
               "comment": lab.comment, "seconds_spent": round(lab.seconds_spent, 2),
               "is_control": item.is_control if item else False, "expected": item.expected if item else "",
               "stratum": item.stratum if item else None, "stratum_size": item.stratum_size if item else None,
               "src": item.src.text if item and item.src else "", "tgt": item.tgt.text if item and item.tgt else "",
               "score": lab.sentence_pair.score if lab.sentence_pair else None,
               "created_at": lab.created_at.isoformat()}


@require_GET
@staff_required
def export_labels(request: HttpRequest, pk: int, fmt: str) -> StreamingHttpResponse:
    """All labels of a campaign as CSV or JSONL, streamed."""
    campaign = Campaign.objects.filter(pk=pk).first()
    if campaign is None or fmt not in ("csv", "jsonl"):
        raise Http404("no such export")

    def csv_lines() -> Iterator[str]:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS)
        writer.writeheader()
        for row in _label_rows(campaign):
            writer.writerow(row)
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
        yield buf.getvalue()

    def jsonl_lines() -> Iterator[str]:
        for row in _label_rows(campaign):
            yield json.dumps(row, ensure_ascii=False) + "\n"

    response = StreamingHttpResponse(csv_lines() if fmt == "csv" else jsonl_lines(),
                                     content_type="text/csv" if fmt == "csv" else "application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-labels.{fmt}"'
    return response


@require_http_methods(["GET", "POST"])
@reviewer_required
def document_pair(request: HttpRequest, pk: int) -> HttpResponse:
    """Two documents side by side, their aligned sentence pairs as linked rows; judge pairs and the whole."""
    pair = DocumentPairCandidate.objects.select_related("src", "tgt", "run").filter(pk=pk).first()
    if pair is None:
        raise Http404("no such document pair")
    if request.method == "POST":
        form = PairLabelForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                label_pair(reviewer=request.user, verdict=d["verdict"], sentence_pair_id=d["sentence_pair"],
                           document_pair_id=d["document_pair"])
            except ReviewError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, "Judgement saved.")
        return redirect("document-pair", pk=pk)
    aligned = list(SentencePairCandidate.objects.filter(doc_pair=pair).select_related("src", "tgt")
                   .order_by("src__position"))
    mine = dict(Label.objects.filter(reviewer=request.user, sentence_pair__in=[a.pk for a in aligned])
                .values_list("sentence_pair_id", "verdict"))
    pair_of_src = {a.src_id: a.pk for a in aligned}
    pair_of_tgt = {a.tgt_id: a.pk for a in aligned}
    context = {
        "pair": pair,
        "src_rows": [(s, pair_of_src.get(s.pk)) for s in pair.src.sentences.order_by("position")],
        "tgt_rows": [(s, pair_of_tgt.get(s.pk)) for s in pair.tgt.sentences.order_by("position")],
        "aligned": [(a, mine.get(a.pk)) for a in aligned],
        "doc_verdict": Label.objects.filter(reviewer=request.user, document_pair=pair).values_list("verdict",
                                                                                                  flat=True).first(),
    }
    return render(request, "annotation/document_pair.html", context)
