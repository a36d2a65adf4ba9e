"""The review app's dependencies on mining's candidate table are declared: outside migrations, no app above mining
names its tables in SQL; the guard of annotation migration 0004 (the triggers that stand in for labels' and campaign
items' foreign keys) sits on the table of mining's model, and a label cannot outlive its candidate."""

import re
from pathlib import Path

import pytest
from django.db import IntegrityError, connection, transaction

from annotation.models import Label
from mining.models import SentencePairCandidate
from tests.factories.annotation import LabelFactory
from tests.factories.mining import SentencePairCandidateFactory

ROOT = Path(__file__).resolve().parents[2]


def test_the_apps_above_mining_name_none_of_its_tables_outside_migrations() -> None:
    """They read mining's rows through its models and selectors (mining.selectors.samples), so a change of mining's
    schema shows up in mining's own code and tests."""
    named = [
        f"{path.relative_to(ROOT)}: {match}"
        for app in ("annotation", "feedback", "pcapp")
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.parts
        for match in re.findall(r"(?<![\w.])mining_[a-z_]+", path.read_text())
    ]
    assert named == []


@pytest.mark.django_db
def test_the_guard_triggers_sit_on_mining_s_candidate_table() -> None:
    with connection.cursor() as cur:
        cur.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal ORDER BY tgname",
            [SentencePairCandidate._meta.db_table],
        )
        names = [r[0] for r in cur.fetchall()]
    assert names == ["sentence_pair_id_changed", "sentence_pairs_deleted", "sentence_pairs_truncated"]


@pytest.mark.django_db(transaction=True)
def test_deleting_a_labelled_candidate_alone_is_refused_at_commit() -> None:
    cand = SentencePairCandidateFactory()
    label = LabelFactory(sentence_pair=cand)
    with pytest.raises(IntegrityError, match="still refers to it"), transaction.atomic():
        SentencePairCandidate.objects.filter(pk=cand.pk)._raw_delete(SentencePairCandidate.objects.db)
    assert Label.objects.filter(pk=label.pk).exists() and SentencePairCandidate.objects.filter(pk=cand.pk).exists()
