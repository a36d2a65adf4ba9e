"""Write a run's kept bitext to a file, without a web server or a token: `manage.py export RUN_ID OUT_FILE`."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from mining.models import JobStatus, MiningRun, RunKind
from mining.selectors import run_threshold_info
from mining.services.export import (
    MOSES_SIDES,
    TSV_HEADER,
    ExportFormat,
    KeepMode,
    KeepRule,
    export_statement,
    export_stream,
)
from mining.services.export_files import write_run_parquet, write_statement


class Command(BaseCommand):
    help = (
        "Write the pairs a run keeps to OUT_FILE ('-' for standard output), as the export page would: by default "
        "those scoring at least the run's threshold (its own, else its language pair's stored one) that no pre-filter "
        "rejected. Moses writes OUT_FILE.SRC_LANG and OUT_FILE.TGT_LANG (and OUT_FILE.scores)."
    )

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, help="the run to export (a sentence, document or alignment run)")
        parser.add_argument("out", help="output file, or - for standard output (not for Moses)")
        parser.add_argument(
            "--format", choices=[f.value for f in ExportFormat], default="tsv", help="file format (default: tsv)"
        )
        parser.add_argument(
            "--keep",
            choices=[m.value for m in KeepMode],
            default="threshold",
            help="threshold: pairs scoring at least the threshold; good: pairs labelled GOOD; both: both at once "
            "(default: threshold)",
        )
        parser.add_argument("--threshold", type=float, default=None, help="instead of the run's threshold")
        parser.add_argument("--include-filtered", action="store_true", help="keep pairs a pre-filter rejected too")
        parser.add_argument(
            "--header",
            action="store_true",
            help="TSV: a first line naming the columns",
        )

    def handle(self, *args, **o):
        run = MiningRun.objects.select_related("src_corpus", "tgt_corpus", "encoder").filter(pk=o["run_id"]).first()
        if run is None:
            raise CommandError(f"no run {o['run_id']}")
        if run.kind not in (RunKind.SENTENCE, RunKind.DOCUMENT, RunKind.ALIGN):
            raise CommandError(f"run {run.pk} is a {run.get_kind_display().lower()} run: it has no pairs to export")
        if run.status != JobStatus.SUCCEEDED:
            raise CommandError(f"run {run.pk} is {run.get_status_display().lower()}: export it once it has succeeded")
        rule = KeepRule(mode=KeepMode(o["keep"]), threshold=o["threshold"], include_filtered=o["include_filtered"])
        fmt = ExportFormat(o["format"])
        statement = export_statement(run=run, rule=rule)
        if fmt is ExportFormat.PARQUET:
            if o["out"] == "-":
                raise CommandError("Parquet is a binary file: give a file name, not -")
            with Path(o["out"]).open("wb") as fh:
                n = write_run_parquet(fh, run=run, rule=rule, statement=statement)
            self.stderr.write(f"run {run.pk}: {n} pair{'s' if n != 1 else ''} ({o['keep']}) written to {o['out']}")
            return
        if fmt is ExportFormat.MOSES:
            if o["out"] == "-":
                raise CommandError("Moses writes one file per side: give a file name, not -")
            outputs = {side: Path(f"{o['out']}.{_suffix(run, side)}") for side in MOSES_SIDES}
        else:
            outputs = {"": None if o["out"] == "-" else Path(o["out"])}
        lines = 0
        for side, path in outputs.items():
            chunks = export_stream(run=run, rule=rule, fmt=fmt, side=side or "src")
            header = TSV_HEADER if o["header"] and fmt is ExportFormat.TSV else ""
            lines = self._write(path, chunks, header=header, unit="<tu>" if fmt is ExportFormat.TMX else "\n")
        if fmt is not ExportFormat.TMX:  # TMX says it in its header; the others in FILE.meta.json
            for path in outputs.values():
                if path is not None:
                    write_statement(path, statement)
        info = run_threshold_info(run)
        threshold = o["threshold"] if o["threshold"] is not None else info.value
        where = ", ".join(str(p) for p in outputs.values() if p) or "standard output"
        self.stderr.write(
            f"run {run.pk}: {lines} pair{'s' if lines != 1 else ''} ({o['keep']}, threshold "
            f"{'none' if threshold is None else f'{threshold:.4f}'}) written to {where}"
        )

    def _write(self, path: Path | None, chunks, *, header: str, unit: str) -> int:
        """Write the chunks (after `header`); returns how many pairs (occurrences of `unit`) they hold."""
        out = self.stdout._out if path is None else path.open("w", encoding="utf-8")
        n = 0
        try:
            if header:
                out.write(header)
            for chunk in chunks:
                out.write(chunk)
                n += chunk.count(unit)
        finally:
            if path is not None:
                out.close()
        return n


def _suffix(run: MiningRun, side: str) -> str:
    return {"src": run.src_lang or "src", "tgt": run.tgt_lang or "tgt"}.get(side, side)
