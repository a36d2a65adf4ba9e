"""Every Celery task that the code sends by name (``send_task``, ``signature``, and the functions that pass a name on
to them) or routes by name (``CELERY_TASK_ROUTES``) is registered in the Celery app: a renamed task or a typo fails
here, not in a worker that drops the message as unregistered.

The names are read from the source (AST) and resolved in their module: a string, a module constant, a dict of names
indexed by a variable (every value counts), or a local variable assigned or imported one of those. A name the test
cannot resolve fails too, so that new code keeps its task names where they can be checked."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGES = ("mining", "annotation", "feedback", "pcapp")


def _values(obj: object) -> set[str]:
    if isinstance(obj, str):
        return {obj}
    if isinstance(obj, dict):
        return {v for v in obj.values() if isinstance(v, str)}
    if isinstance(obj, list | tuple | set | frozenset):
        return {v for v in obj if isinstance(v, str)}
    return set()


def _resolve(expr: ast.expr, module: object, local: dict[str, object]) -> set[str]:
    if isinstance(expr, ast.Constant):
        return _values(expr.value)
    if isinstance(expr, ast.Name):
        if isinstance(local.get(expr.id), ast.expr):
            return _resolve(local[expr.id], module, {k: v for k, v in local.items() if k != expr.id})
        return _values(local[expr.id] if expr.id in local else getattr(module, expr.id, None))
    if isinstance(expr, ast.Attribute):
        return _values(eval(compile(ast.Expression(expr), "<task name>", "eval"), vars(module)))  # noqa: S307
    if isinstance(expr, ast.Subscript):
        return _resolve(expr.value, module, local)
    return set()


def _enclosing(tree: ast.Module) -> dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None]:
    """Each node -> the innermost function around it (None at module level)."""
    owner: dict[ast.AST, ast.FunctionDef | ast.AsyncFunctionDef | None] = {}

    def visit(node: ast.AST, func: ast.FunctionDef | ast.AsyncFunctionDef | None) -> None:
        owner[node] = func
        inner = node if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) else func
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(tree, None)
    return owner


def _locals(func: ast.FunctionDef | ast.AsyncFunctionDef | None, module: object) -> dict[str, object]:
    """A function's local names: assigned expressions, and the values its own ``from ... import`` statements bind."""
    local: dict[str, object] = {}
    for n in ast.walk(func) if func else ():
        if isinstance(n, ast.Assign):
            local.update({t.id: n.value for t in n.targets if isinstance(t, ast.Name)})
        elif isinstance(n, ast.ImportFrom):
            source = importlib.import_module("." * n.level + (n.module or ""), module.__package__)
            local.update({a.asname or a.name: getattr(source, a.name, None) for a in n.names})
    return local


def _calls() -> list[tuple[Path, ast.Call, str, ast.FunctionDef | ast.AsyncFunctionDef | None]]:
    """(file, call, called name, enclosing function) of every call by plain or attribute name in the apps."""
    calls = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node, func in _enclosing(ast.parse(path.read_text())).items():
                if isinstance(node, ast.Call):
                    f = node.func
                    called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                    if called:
                        calls.append((path, node, called, func))
    return calls


def _arg(call: ast.Call, name: str, position: int) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def sent_task_names() -> dict[str, set[str]]:
    """'path:line' of each call that sends a task by name -> the names it may send.

    A function that passes one of its own parameters on as the task name (``send_task_or_fail(name=...)``,
    ``jobs_send_unsent(task=...)``) forwards: its callers' arguments for that parameter are the names checked."""
    calls = _calls()
    senders = {"send_task": ("name", 0), "signature": ("name", 0)}
    while True:
        found: dict[str, set[str]] = {}
        forwarders: dict[str, tuple[str, int]] = {}
        for path, node, called, func in calls:
            arg = _arg(node, *senders[called]) if called in senders else None
            if arg is None:
                continue
            params = [a.arg for a in (func.args.posonlyargs + func.args.args + func.args.kwonlyargs)] if func else []
            if isinstance(arg, ast.Name) and arg.id in params:
                position = params.index(arg.id) - (params[0] in ("self", "cls"))
                forwarders[func.name] = (arg.id, position)
                continue
            rel = path.relative_to(ROOT)
            module = importlib.import_module(".".join(rel.with_suffix("").parts).removesuffix(".__init__"))
            found[f"{rel}:{node.lineno}"] = _resolve(arg, module, _locals(func, module))
        new = {name: how for name, how in forwarders.items() if name not in senders}
        if not new:
            return found
        senders.update(new)


def test_every_task_sent_by_name_is_registered() -> None:
    from pcapp.celery import app

    app.loader.import_default_modules()
    registered = set(app.tasks)
    found = sent_task_names()
    unresolved = sorted(site for site, names in found.items() if not names)
    assert unresolved == [], f"task names the test cannot resolve (use a module constant): {unresolved}"
    missing = {site: sorted(names - registered) for site, names in found.items() if names - registered}
    assert missing == {}
    sent = set().union(*found.values())
    # The scan finds the senders it is meant to check (a vacuous pass would hide a broken scan).
    assert {"pcapp.execute_run", "mining.import_corpus", "mining.export_run", "mining.site_shard"} <= sent
    assert {f"mining.shard_{q}" for q in ("embed", "index", "search", "io")} <= sent


def test_every_routed_task_is_registered(settings) -> None:
    from pcapp.celery import app

    app.loader.import_default_modules()
    assert sorted(set(settings.CELERY_TASK_ROUTES) - set(app.tasks)) == []
