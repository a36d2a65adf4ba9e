"""Argument types shared by the management commands (Django does not load modules starting with '_' as commands)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def comma_ints(minimum: int | None = None) -> Callable[[str], list[int]]:
    """An argparse type: '4,16' -> [4, 16]; each at least `minimum` when given."""

    def parse(value: str) -> list[int]:
        try:
            numbers = [int(x) for x in value.split(",")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be whole numbers separated by commas, got '{value}'") from None
        if minimum is not None and min(numbers) < minimum:
            raise argparse.ArgumentTypeError(f"sizes must be >= {minimum}, got '{value}'")
        return numbers

    return parse
