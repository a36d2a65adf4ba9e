"""manage.py evaluate_mining on a small imported TSV corpus of gold en-fr pairs."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from mining.models import JobStatus
from mining.services.imports import import_execute, import_job_create

DATA = Path(__file__).resolve().parents[1] / "data" / "import"


@pytest.mark.django_db
def test_table_has_a_row_per_neighbourhood_size_margin_and_strategy():
    job = import_execute(
        job=import_job_create(
            corpus_name="admin",
            fmt="tsv",
            paths=[str(DATA / "admin-en-fr.tsv")],
            options={"src_lang": "en", "tgt_lang": "fr", "header": True},
        )
    )
    assert job.status == JobStatus.SUCCEEDED, job.error
    out = StringIO()
    call_command(
        "evaluate_mining",
        "admin",
        "--src",
        "en",
        "--tgt",
        "fr",
        "--k",
        "2,4",
        "--share",
        "0.3",
        "--min-words",
        "1",
        stdout=out,
    )
    rows = [line.split() for line in out.getvalue().splitlines() if line.split() and line.split()[0].isdigit()]
    assert sorted({(r[0], r[1], r[2]) for r in rows}) == sorted(
        (k, m, s)
        for k in ("2", "4")
        for m in ("absolute", "distance", "ratio")
        for s in ("forward", "backward", "intersection", "max_score")
    )
    with pytest.raises(CommandError, match="whole numbers"):
        call_command("evaluate_mining", "admin", "--src", "en", "--tgt", "fr", "--k", "4,x")
    with pytest.raises(CommandError, match=">= 1"):
        call_command("evaluate_mining", "admin", "--src", "en", "--tgt", "fr", "--k", "0")
