"""Argument types shared by the management commands (Django does not load modules starting with '_' as commands)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.management.base import CommandError

from mining.models import MiningRun
from mining.params import ParamsError, RunParams
from mining.services.runs import run_create

P = TypeVar("P", bound=RunParams)


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


def add_param_arguments(parser: argparse.ArgumentParser, params: type[RunParams]) -> None:
    """One option per parameter of `params` (--k, --margin, --filters/--no-filters, ...), with its help, choices and
    default in the help text; the values are checked by `params_from_options`, with the form's and the API's words."""
    for spec in params.specs():
        flag = "--" + spec.name.replace("_", "-")
        text = f"{spec.describe()} Default: {spec.initial}."
        if spec.kind is bool:
            parser.add_argument(flag, dest=spec.name, action=argparse.BooleanOptionalAction, default=None, help=text)
        else:
            parser.add_argument(flag, dest=spec.name, default=None, metavar=spec.name.upper(), help=text)


def params_from_options(params: type[P], options: dict[str, Any]) -> P:
    """The parameters given on the command line (defaults for the others); CommandError names each bad one."""
    given = {spec.name: options[spec.name] for spec in params.specs() if options.get(spec.name) is not None}
    try:
        return params.from_dict(given)
    except ParamsError as exc:
        raise CommandError(str(exc)) from None


def create_run(**kwargs: Any) -> MiningRun:
    """`run_create` for a command: its parameter and start-rule errors (`check_run_start`) become a CommandError with
    the form's and the API's words ("tgt_lang: Pick two different languages ...")."""
    try:
        return run_create(**kwargs)
    except ParamsError as exc:
        raise CommandError(str(exc)) from None
