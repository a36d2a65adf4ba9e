"""Bulk writes with binary COPY, and id reservation so rows can reference rows written in the same COPY stream.

COPY is ~40x faster than executemany here (measured on this machine); candidate tables take millions of rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from django.db import connection, models


def reserve_ids(model: type[models.Model], n: int) -> np.ndarray:
    """Take `n` fresh primary keys from the model's id sequence, (n,) int64.

    Lets an importer give sentences their ids before COPY, so gold pairs can be written in the same pass.
    """
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    table = model._meta.db_table
    with connection.cursor() as cur:
        # The sequence is looked up once (pg_get_serial_sequence() per row cost 8x the nextval() itself), and a
        # contiguous block, the usual case, comes back as its two ends instead of n rows.
        cur.execute("SELECT pg_get_serial_sequence(%s, 'id')", [table])
        (sequence,) = cur.fetchone()
        cur.execute(
            "SELECT min(v), max(v), CASE WHEN max(v) - min(v) + 1 = count(*) THEN NULL ELSE array_agg(v) END "
            "FROM (SELECT nextval(%s::regclass) AS v FROM generate_series(1, %s)) AS s",
            [sequence, n],
        )
        low, high, scattered = cur.fetchone()
    if scattered is not None:  # another session drew from the sequence meanwhile
        return np.asarray(scattered, dtype=np.int64)
    return np.arange(low, high + 1, dtype=np.int64)


def copy_rows(
    model: type[models.Model],
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    types: Sequence[str],
) -> int:
    """Write rows into the model's table with binary COPY on Django's connection (inside its transaction).

    Args:
        model: the Django model whose table receives the rows.
        columns: database column names, in row order.
        rows: an iterable of tuples; values must match `types`.
        types: Postgres type names for binary COPY (e.g. "int8", "text", "float4", "jsonb").

    Returns:
        The number of rows written.
    """
    table = connection.ops.quote_name(model._meta.db_table)
    cols = ", ".join(connection.ops.quote_name(c) for c in columns)
    n = 0
    connection.ensure_connection()
    with connection.cursor() as cur:
        with cur.cursor.copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(list(types))
            for row in rows:
                copy.write_row(row)
                n += 1
    return n
