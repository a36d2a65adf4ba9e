"""Bulk writes with binary COPY, and id reservation so rows can reference rows written in the same COPY stream.

COPY is ~40x faster than executemany here (see ../shared/PERFORMANCE.md); candidate tables take millions of rows.
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
        cur.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [table, n]
        )
        return np.fromiter((r[0] for r in cur.fetchall()), dtype=np.int64, count=n)


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
