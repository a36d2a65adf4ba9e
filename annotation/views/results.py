"""Campaign results, label exports, and staff reviews of document pairs with their aligned sentences (all staff)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from mining.core.urlsignals import describe_pair
from mining.models import DocumentPairCandidate, SentencePairCandidate
from pcapp.permissions import staff_required

from ..forms import PairLabelForm
from ..models import Campaign, Label
from ..selectors import LABEL_FIELDS, campaign_results, label_rows
from ..services import ReviewError, label_pair


@require_GET
@staff_required
def results(request: HttpRequest, pk: int) -> HttpResponse:
    """GOOD rate per run with its interval (side by side), agreement, controls, progress."""
    campaign = Campaign.objects.filter(pk=pk).first()
    if campaign is None:
        raise Http404("no such campaign")
    pairs = sorted({(r.src_lang, r.tgt_lang) for r in campaign.runs.all() if r.src_lang and r.tgt_lang})
    context = {"campaign": campaign, "r": campaign_results(campaign), "pairs": pairs}
    return render(request, "annotation/results.html", context)


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is a formula to a spreadsheet (=HYPERLINK(...), +cmd|...)."""


def csv_cell(value: object) -> object:
    """A text value as a CSV cell a spreadsheet shows as text: a leading ' when it starts like a formula (OWASP's
    advice for CSV injection). Numbers are left as they are; the JSONL export keeps every text exactly."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


@require_GET
@staff_required
def export_labels(request: HttpRequest, pk: int, fmt: str) -> StreamingHttpResponse:
    """All labels of a campaign as CSV or JSONL, streamed."""
    campaign = Campaign.objects.filter(pk=pk).first()
    if campaign is None or fmt not in ("csv", "jsonl"):
        raise Http404("no such export")

    def csv_lines() -> Iterator[str]:
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=LABEL_FIELDS)
        writer.writeheader()
        for row in label_rows(campaign):
            writer.writerow({k: csv_cell(v) for k, v in row.items()})
            yield buf.getvalue()
            buf.seek(0)
            buf.truncate()
        yield buf.getvalue()

    def jsonl_lines() -> Iterator[str]:
        for row in label_rows(campaign):
            yield json.dumps(row, ensure_ascii=False) + "\n"

    response = StreamingHttpResponse(
        csv_lines() if fmt == "csv" else jsonl_lines(),
        content_type="text/csv" if fmt == "csv" else "application/x-ndjson",
    )
    response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-labels.{fmt}"'
    return response


@require_http_methods(["GET", "POST"])
@staff_required
def document_pair(request: HttpRequest, pk: int) -> HttpResponse:
    """Two documents side by side, their aligned sentence pairs as linked rows; judge pairs and the whole (a staff
    review: document runs are not reviewed in campaigns, and their scores are run results)."""
    pair = DocumentPairCandidate.objects.select_related("src", "tgt", "run").filter(pk=pk).first()
    if pair is None:
        raise Http404("no such document pair")
    if request.method == "POST":
        form = PairLabelForm(request.POST)
        if form.is_valid():
            d = form.cleaned_data
            try:
                label_pair(
                    reviewer=request.user,
                    verdict=d["verdict"],
                    sentence_pair_id=d["sentence_pair"],
                    document_pair_id=d["document_pair"],
                )
            except ReviewError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, "Judgement saved.")
        return redirect("document-pair", pk=pk)
    aligned = list(
        SentencePairCandidate.objects.filter(doc_pair=pair).select_related("src", "tgt").order_by("src__position")
    )
    mine = dict(
        Label.objects.filter(reviewer=request.user, sentence_pair__in=[a.pk for a in aligned]).values_list(
            "sentence_pair_id", "verdict"
        )
    )
    siblings = DocumentPairCandidate.objects.filter(run_id=pair.run_id).values_list("pk", flat=True)
    pair_of_src = {a.src_id: a.pk for a in aligned}
    pair_of_tgt = {a.tgt_id: a.pk for a in aligned}
    context = {
        "pair": pair,
        "pair_docs": (pair.src, pair.tgt),
        "url_evidence": describe_pair(pair.src.url, pair.tgt.url, pair.src.lang, pair.tgt.lang)
        if pair.src.url and pair.tgt.url
        else None,
        "src_rows": [(s, pair_of_src.get(s.pk)) for s in pair.src.sentences.order_by("position")],
        "tgt_rows": [(s, pair_of_tgt.get(s.pk)) for s in pair.tgt.sentences.order_by("position")],
        "aligned": [(a, mine.get(a.pk)) for a in aligned],
        # the run's pairs in rank order (as its results page lists them): the previous and the next one
        "prev_pair": siblings.filter(rank__lt=pair.rank).order_by("-rank").first(),
        "next_pair": siblings.filter(rank__gt=pair.rank).order_by("rank").first(),
        "doc_verdict": Label.objects.filter(reviewer=request.user, document_pair=pair)
        .values_list("verdict", flat=True)
        .first(),
    }
    return render(request, "annotation/document_pair.html", context)
