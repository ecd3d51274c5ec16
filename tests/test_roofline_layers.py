"""The readers' layers, read from the code: which gpuscope package each of roofline, measuring,
profiling and report may import (every import: module level, ``TYPE_CHECKING`` and inside
functions), and no import circle among their modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gpuscope"

#: package -> the gpuscope packages (and top-level modules) it may import, besides itself.
ALLOWED = {
    "roofline": {"schema", "telemetry", "results", "batchgc", "errors", "textsafe"},
    "measuring": {"roofline", "probing", "schema", "telemetry", "results", "fileio", "errors"},
    "profiling": {"measuring", "roofline", "probing", "schema", "telemetry", "results", "errors"},
    "report": {
        "fleet",
        "probing",  # the probes' own pure records: the transfer matrix and the collective tables
        "profiling",
        "roofline",
        "schema",
        "telemetry",
        "results",
        "fileio",
        "errors",
        "paths",
        "textsafe",
        "version",
    },  # fmt: skip
}


def _imports(path: Path) -> set[str]:
    """The gpuscope modules ``path`` imports anywhere (relative imports resolved)."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("gpuscope"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: -node.level] if path.name != "__init__.py" else module.split(".")
                base = ".".join([*anchor, base] if base else anchor)
            if base.startswith("gpuscope"):
                found.update(f"{base}.{alias.name}" for alias in node.names)
                found.add(base)
    return found


def _package_of(name: str) -> str:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = sorted(
        f"{path.relative_to(PACKAGE.parent)} imports {name}"
        for path in sorted((PACKAGE / package).glob("*.py"))
        for name in _imports(path)
        if _package_of(name) != package and _package_of(name) not in ALLOWED[package]
    )
    assert not wrong, wrong


def test_no_import_circle_among_the_readers_modules() -> None:
    modules = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for package in ALLOWED
        for path in (PACKAGE / package).glob("*.py")
    }
    graph = {name: {target for target in _imports(path) if target in modules and target != name}
             for name, path in modules.items()}  # fmt: skip

    def reaches(start: str, goal: str) -> bool:
        seen, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                stack.extend(graph[node])
        return False

    circles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if a < b and reaches(b, a))
    assert not circles, circles


def test_gpuscope_itself_names_the_api_only_for_type_checkers() -> None:
    """``gpuscope/__init__`` imports the measuring and profiling modules under ``TYPE_CHECKING``
    only: at run time they load on first use."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert {node.module for node in top_level if isinstance(node, ast.ImportFrom)} <= {
        "__future__", "typing", "gpuscope.version",
    }  # fmt: skip
