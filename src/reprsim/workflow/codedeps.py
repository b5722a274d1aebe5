"""Which library files a workflow script runs, found statically, so rules can declare them as input.

A rule whose script or any reprsim module it imports (transitively) changes in
content is rerun; a module it never imports can change freely.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

PACKAGE = "reprsim"


def _module_path(name: str, src_root: Path) -> Path | None:
    base = src_root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(path: Path) -> frozenset[str]:
    """Names of reprsim modules `path` imports (including `from reprsim import submodule`)."""
    stat = path.stat()
    return _parsed_imports(str(path), stat.st_mtime_ns, stat.st_size)


# Each rule's closure shares most of its modules with the others': parsed once per content stamp, building the DAG
# reads each file once instead of once per rule that imports it (seconds, paid by every Snakemake start, SLURM jobs'
# included).
@lru_cache(maxsize=None)
def _parsed_imports(path: str, mtime_ns: int, size: int) -> frozenset[str]:
    found = set()
    for node in _statements(ast.parse(Path(path).read_text(), filename=path).body):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == PACKAGE:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def _statements(nodes) -> Iterator[ast.AST]:
    """Every statement, nested ones included (an import inside a function, a try, a with), without descending into
    expressions, where no import can be: a third of the time of ast.walk."""
    for node in nodes:
        yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            children = getattr(node, field, None)
            if isinstance(children, list):
                yield from _statements(children)


def _with_parents(name: str) -> list[str]:
    """A module and the packages whose __init__ runs when it is imported."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


@lru_cache(maxsize=None)
def code_dependencies(script: str | Path, src_root: str | Path) -> tuple[str, ...]:
    """`script` and every file of the reprsim package it imports, transitively, sorted."""
    script, src_root = Path(script), Path(src_root)
    if not script.is_file():
        raise FileNotFoundError(f"workflow script {script} does not exist")
    seen: set[Path] = set()
    pending = [script]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for module in _imported_modules(path):
            for name in _with_parents(module):
                found = _module_path(name, src_root)
                if found is not None and found not in seen:
                    pending.append(found)
    return tuple(sorted(str(p) for p in seen))
