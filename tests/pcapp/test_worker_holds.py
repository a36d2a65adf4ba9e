"""`./run worker --holds`: the index groups of compressed runs a worker holds become its group queues."""

import pytest

from pcapp.queues import group_queue
from pcapp.worker import parse_holds


def test_holds_parse_to_groups_and_their_queues():
    assert parse_holds("0,2-4, 3") == [0, 2, 3, 4]
    assert parse_holds("") == []
    assert group_queue(3, {}) == "search.g3"
    assert group_queue(0, {"PCAPP_QUEUE_SEARCH": "search-big"}) == "search-big.g0"
    for bad in ("a", "3-1", "-2"):
        with pytest.raises(ValueError, match="not a group number"):
            parse_holds(bad)
