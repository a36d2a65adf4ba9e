"""Django admin for the mining models; runs are started, cancelled and re-run through the run services."""

from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from .forms import RunStartForm
from .models import (
    Artefact,
    Corpus,
    Document,
    DocumentPairCandidate,
    GoldDocumentPair,
    GoldSentencePair,
    ImportJob,
    JobStatus,
    MiningRun,
    RunShard,
    Sentence,
    SentencePairCandidate,
)
from .selectors import job_bar
from .services.encoders import combine_encoders
from .services.runs import run_cancel, run_create, run_delete, run_retry


@admin.register(Corpus)
class CorpusAdmin(admin.ModelAdmin):
    list_display = ["name", "languages", "source", "created_at"]
    search_fields = ["name"]
    readonly_fields = ["stats", "created_at"]
    actions = ["start_run"]

    @admin.action(description="Start a mining run on the selected corpus")
    def start_run(self, request: HttpRequest, queryset) -> HttpResponse | None:
        corpus = queryset.first()
        if corpus is None:
            return None
        return redirect(reverse("admin:mining_miningrun_start") + f"?src_corpus={corpus.pk}")


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["external_id", "corpus", "lang", "n_sentences"]
    list_filter = ["lang"]
    list_select_related = ["corpus"]
    raw_id_fields = ["corpus"]
    search_fields = ["external_id", "title"]
    show_full_result_count = False


@admin.register(Sentence)
class SentenceAdmin(admin.ModelAdmin):
    list_display = ["id", "lang", "document", "position", "text"]
    list_select_related = ["document"]
    raw_id_fields = ["corpus", "document"]
    show_full_result_count = False


@admin.register(GoldSentencePair)
class GoldSentencePairAdmin(admin.ModelAdmin):
    list_display = ["id", "corpus", "src", "tgt"]
    list_select_related = ["corpus", "src", "tgt"]
    raw_id_fields = ["corpus", "src", "tgt"]
    show_full_result_count = False


@admin.register(GoldDocumentPair)
class GoldDocumentPairAdmin(admin.ModelAdmin):
    list_display = ["id", "corpus", "src", "tgt"]
    list_select_related = ["corpus", "src", "tgt"]
    raw_id_fields = ["corpus", "src", "tgt"]


@admin.register(ImportJob)
class ImportJobAdmin(admin.ModelAdmin):
    list_display = ["corpus_name", "format", "status", "stage", "done", "total", "created_at"]
    list_filter = ["status", "format"]
    readonly_fields = ["status", "stage", "done", "total", "stats", "error", "started_at", "finished_at"]


@admin.register(Artefact)
class ArtefactAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "kind", "src_lang", "tgt_lang", "is_active", "created_at"]
    list_filter = ["kind", "is_active"]
    raw_id_fields = ["trained_on"]
    actions = ["combine_encoders"]

    @admin.action(description="Combine the selected encoders (equal weights) into a new 'combined' encoder")
    def combine_encoders(self, request: HttpRequest, queryset) -> None:
        try:
            artefact = combine_encoders([(a, 1.0) for a in queryset.order_by("pk")], created_by=request.user)
        except ValueError as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
            return
        self.message_user(
            request,
            f"Registered encoder combined:{artefact.version}; other weights: "
            f"manage.py combine_encoders NAME:VERSION=WEIGHT ...",
        )


class RunShardInline(admin.TabularInline):
    model = RunShard
    extra = 0
    readonly_fields = ["stage", "shard_no", "result", "lease_owner", "lease_expires_at", "started_at", "finished_at"]
    can_delete = False


@admin.register(RunShard)
class RunShardAdmin(admin.ModelAdmin):
    list_display = ["run", "stage", "shard_no", "lease_owner", "started_at", "finished_at"]
    list_select_related = ["run"]
    raw_id_fields = ["run"]


@admin.register(MiningRun)
class MiningRunAdmin(admin.ModelAdmin):
    """Runs change state only through the run services: start (custom page), cancel, re-run and delete."""

    list_display = ["__str__", "kind", "status", "stage", "progress_percent", "src_lang", "tgt_lang", "created_at"]
    list_filter = ["status", "kind"]
    list_select_related = ["src_corpus", "tgt_corpus"]
    inlines = [RunShardInline]
    actions = ["cancel_runs", "retry_runs", "delete_runs_fast"]
    fields = [
        "name",
        "kind",
        "src_corpus",
        "tgt_corpus",
        "src_lang",
        "tgt_lang",
        "encoder",
        "parent",
        "params",
        "status",
        "stage",
        "done",
        "total",
        "timings",
        "stats",
        "error",
        "cancel_requested",
        "celery_task_id",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
    ]
    readonly_fields = [f for f in fields if f != "name"]

    def get_deleted_objects(self, objs, request: HttpRequest):
        """The confirmation page lists the runs and their candidate counts (not a million rows); running runs block."""
        runs = list(objs)
        counts = dict(
            SentencePairCandidate.objects.filter(run__in=runs).values_list("run").annotate(n=Count("id")).order_by()
        )
        listed = [f"{run}: {counts.get(run.pk, 0):,} sentence-pair candidates, its shards and files" for run in runs]
        blocking = [
            f"{run} is {run.status}: cancel it before deleting it"
            for run in runs
            if not run.is_finished and not run.is_stalled and run.status != JobStatus.PENDING
        ]
        return listed, {"runs": len(runs)}, set(), blocking

    def delete_model(self, request: HttpRequest, obj: MiningRun) -> None:
        run_delete(run=obj)

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        for run in queryset:
            run_delete(run=run)

    @admin.display(description="progress", ordering="progress")
    def progress_percent(self, run: MiningRun) -> str:
        bar = job_bar(run)
        return bar.label if bar.percent is None or not bar.overall else f"{bar.percent:.0f} %"

    def get_urls(self):
        start = path("start/", self.admin_site.admin_view(self.start_view), name="mining_miningrun_start")
        return [start, *super().get_urls()]

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None) -> HttpResponse:
        return HttpResponseRedirect(reverse("admin:mining_miningrun_start"))

    def start_view(self, request: HttpRequest) -> HttpResponse:
        """The run form inside the admin; a valid POST calls run_create and opens the new run."""
        if not self.has_add_permission(request):
            return HttpResponse(status=403)
        initial = {k: request.GET[k] for k in ("src_corpus", "tgt_corpus") if k in request.GET}
        form = RunStartForm(request.POST or None, initial=initial)
        if request.method == "POST" and form.is_valid():
            run = run_create(user=request.user, **form.run_kwargs())
            self.message_user(request, f"Run {run.pk} queued.", messages.SUCCESS)
            return redirect("admin:mining_miningrun_change", run.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "form": form,
            "title": "Start a mining run",
        }
        return TemplateResponse(request, "admin/mining/miningrun/start.html", context)

    @admin.action(description="Cancel the selected runs")
    def cancel_runs(self, request: HttpRequest, queryset) -> None:
        done = 0
        for run in queryset:
            if not run.is_finished:
                run_cancel(run=run)
                done += 1
        self.message_user(request, f"Cancel requested for {done} run(s).")

    @admin.action(description="Re-run the selected failed or cancelled runs (resume)")
    def retry_runs(self, request: HttpRequest, queryset) -> None:
        done = 0
        for run in queryset:
            if run.can_retry:
                run_retry(run=run)
                done += 1
        self.message_user(request, f"{done} run(s) queued again.")

    @admin.action(description="Delete the selected finished runs with their candidates and files (fast)")
    def delete_runs_fast(self, request: HttpRequest, queryset) -> None:
        deleted, refused = 0, []
        for run in queryset:
            try:
                run_delete(run=run)
                deleted += 1
            except ValueError as exc:
                refused.append(str(exc))
        self.message_user(request, f"Deleted {deleted} run(s).")
        for message in refused:
            self.message_user(request, message, messages.WARNING)


def _rounded(name: str, digits: int = 4):
    """A changelist column showing a float field rounded (the admin printed 1.0000000000000002)."""

    @admin.display(description=name, ordering=name)
    def column(obj) -> str:
        value = getattr(obj, name)
        return "–" if value is None else f"{value:.{digits}f}"

    column.__name__ = f"{name}_rounded"
    return column


class CandidateAdmin(admin.ModelAdmin):
    list_display = ["id", "run", "rank", _rounded("score"), _rounded("cosine"), _rounded("confidence"), "filter_reason"]
    list_select_related = ["run"]
    raw_id_fields = ["run", "src", "tgt"]
    show_full_result_count = False
    ordering = ["run", "rank"]


@admin.register(SentencePairCandidate)
class SentencePairCandidateAdmin(CandidateAdmin):
    raw_id_fields = ["run", "src", "tgt", "doc_pair", "calibration"]


@admin.register(DocumentPairCandidate)
class DocumentPairCandidateAdmin(CandidateAdmin):
    pass


def _register_the_rest() -> None:
    """Models added to the mining app later still get a plain admin (with raw-id widgets for big tables)."""
    from django.apps import apps

    for model in apps.get_app_config("mining").get_models():
        if not admin.site.is_registered(model):
            fks = [f.name for f in model._meta.get_fields() if f.many_to_one and f.concrete]
            admin.site.register(
                model,
                type(
                    f"{model.__name__}Admin",
                    (admin.ModelAdmin,),
                    {"raw_id_fields": fks, "show_full_result_count": False},
                ),
            )


_register_the_rest()
