"""Id reservation for rows written with COPY."""

import pytest
from django.db import connection

from mining.db.bulk import reserve_ids
from mining.models import Sentence

pytestmark = pytest.mark.django_db


def _next_value() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT nextval(pg_get_serial_sequence('mining_sentence', 'id'))")
        return cur.fetchone()[0]


def test_a_contiguous_block_comes_back_as_fresh_ascending_ids():
    ids = reserve_ids(Sentence, 1000)
    assert ids.dtype.name == "int64" and len(ids) == 1000
    assert list(ids) == list(range(int(ids[0]), int(ids[0]) + 1000))
    assert _next_value() > ids[-1]
    assert len(reserve_ids(Sentence, 0)) == 0


def test_values_taken_by_another_session_meanwhile_are_not_handed_out():
    # A sequence that steps by 3 leaves gaps as if others drew between our values: we get exactly the values drawn.
    with connection.cursor() as cur:
        cur.execute("ALTER SEQUENCE mining_sentence_id_seq INCREMENT BY 3")
    first = _next_value()
    ids = reserve_ids(Sentence, 50)
    assert sorted(ids.tolist()) == [first + 3 * (i + 1) for i in range(50)]
