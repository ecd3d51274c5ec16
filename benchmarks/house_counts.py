"""Counts of how the package is built (issue 25's targets), read from the code's syntax trees.

- ``any``: every use of ``typing.Any`` (the name ``Any`` or ``typing.Any``) in ``gpuscope/``.
- ``dict_any_annotations``: annotations (parameters, returns, annotated assignments) that contain
  ``dict[str, Any]`` or ``dict[str, object]`` (``Dict``/``Mapping``/``MutableMapping`` alike).
- ``import_circles``: strongly connected groups of two or more modules in the graph of every
  first-party import (module level, under ``if TYPE_CHECKING:`` and inside functions: a cycle dodged
  by a late import is still a cycle); ``import_circles_at_import_time`` counts module-level imports
  only. A package's ``__init__`` re-exporting its modules is no circle by itself: Python's implicit
  import of a parent package is not an edge, an explicit one is.
- ``in_function_imports``: first-party imports inside a function body, excluding those whose target
  imports torch, Textual or matplotlib at its top (a lazy import of a heavy library through our own
  module is what keeps ``gpuscope --help`` fast, not a dodged cycle).
- ``private_textual``: uses of Textual's private names: imports of ``textual._*`` modules or of
  ``_names`` from Textual, and attribute reads ``x._name`` in ``gpuscope/tui`` where ``_name`` is defined
  by Textual's own source and not by gpuscope.

    python benchmarks/house_counts.py            # the working tree
    python benchmarks/house_counts.py --rev HEAD~3   # a commit, for a before/after pair
    python benchmarks/house_counts.py --list circles   # what is counted, one per line
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "textual", "matplotlib")
MAPPINGS = {"dict", "Dict", "Mapping", "MutableMapping"}


@dataclass
class Module:
    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    top_imports: set[str] = field(default_factory=set)  # first-party modules imported at module level
    type_checking_imports: set[str] = field(default_factory=set)
    function_imports: set[str] = field(default_factory=set)  # first-party modules imported inside functions
    imports_heavy: bool = False


def _export(rev: str | None, target: Path) -> Path:
    if rev is None:
        return ROOT / "gpuscope"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "gpuscope"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "gpuscope"


def _load(package: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        modules[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8")), is_package)
    return modules


def _targets(node: ast.Import | ast.ImportFrom, module: Module, known: dict[str, Module]) -> list[str]:
    """First-party modules an import statement names (``from a import b`` is module a.b when it exists)."""
    names: list[str] = []
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            anchor = module.name.split(".")
            if not module.is_package:
                anchor = anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name:
            found.append(name)
    return found


def _is_heavy(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] in HEAVY for alias in node.names)
    return node.level == 0 and (node.module or "").split(".")[0] in HEAVY


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level(body: list[ast.stmt], in_type_checking: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Statements run when the module is imported (not inside functions or classes' methods)."""
    for stmt in body:
        yield stmt, in_type_checking
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body, in_type_checking or _type_checking(stmt.test))
            yield from _top_level(stmt.orelse, in_type_checking)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody, *[h.body for h in stmt.handlers]):
                yield from _top_level(block, in_type_checking)
        elif isinstance(stmt, (ast.With, ast.ClassDef)):
            yield from _top_level(stmt.body, in_type_checking)


def _link(modules: dict[str, Module]) -> None:
    for module in modules.values():
        for stmt, in_type_checking in _top_level(module.tree.body):
            if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            if _is_heavy(stmt) and not in_type_checking:
                module.imports_heavy = True
            for target in _targets(stmt, module, modules):
                if target == module.name:
                    continue
                (module.type_checking_imports if in_type_checking else module.top_imports).add(target)
        for func in ast.walk(module.tree):
            if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(func):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        module.function_imports.update(t for t in _targets(node, module, modules) if t != module.name)


def _circles(modules: dict[str, Module], every_import: bool) -> list[list[str]]:
    """Tarjan's strongly connected components of size >= 2: over every first-party import (module
    level, ``TYPE_CHECKING`` and inside functions: a cycle dodged by a late import is still a cycle),
    or over those that run when a module is imported."""
    graph = {
        name: sorted(m.top_imports | (m.type_checking_imports | m.function_imports if every_import else set()))
        for name, m in modules.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work: list[tuple[str, Iterator[str]]] = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(graph[target])))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))

    for name in graph:
        if name not in index:
            visit(name)
    return sorted(found)


def _imports_heavy(name: str, modules: dict[str, Module], seen: set[str] | None = None) -> bool:
    """True when importing ``name`` imports torch, Textual or matplotlib (through its own top-level imports)."""
    seen = set() if seen is None else seen
    if name in seen:
        return False
    seen.add(name)
    module = modules[name]
    return module.imports_heavy or any(_imports_heavy(t, modules, seen) for t in module.top_imports)


def _in_function_imports(modules: dict[str, Module]) -> tuple[list[str], list[str]]:
    """(counted, excused): first-party imports inside functions, as 'module:line -> target'."""
    counted: list[str] = []
    excused: list[str] = []
    for module in modules.values():
        for func in ast.walk(module.tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for target in _targets(node, module, modules):
                    label = f"{module.name}:{node.lineno} -> {target}"
                    (excused if _imports_heavy(target, modules) else counted).append(label)
    return sorted(set(counted)), sorted(set(excused))


def _any_uses(modules: dict[str, Module]) -> list[str]:
    found = []
    for module in modules.values():
        for node in ast.walk(module.tree):
            if (isinstance(node, ast.Name) and node.id == "Any") or (
                isinstance(node, ast.Attribute) and node.attr == "Any"
            ):
                found.append(f"{module.name}:{node.lineno}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
                # string annotations ("dict[str, Any]") are annotations too
                try:
                    inner = ast.parse(node.value, mode="eval")
                except SyntaxError:
                    continue
                found.extend(
                    f"{module.name}:{node.lineno}"
                    for sub in ast.walk(inner)
                    if isinstance(sub, ast.Name) and sub.id == "Any"
                )
    return found


def _is_dict_any(node: ast.expr) -> bool:
    if not isinstance(node, ast.Subscript):
        return False
    base = node.value
    name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
    if name not in MAPPINGS or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return False
    key, value = node.slice.elts
    return (
        isinstance(key, ast.Name)
        and key.id == "str"
        and isinstance(value, (ast.Name, ast.Attribute))
        and (value.id if isinstance(value, ast.Name) else value.attr) in ("Any", "object")
    )


def _annotations(tree: ast.Module) -> Iterator[ast.expr]:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def _dict_any(modules: dict[str, Module]) -> list[str]:
    found = []
    for module in modules.values():
        for annotation in _annotations(module.tree):
            expr = annotation
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                try:
                    expr = ast.parse(annotation.value, mode="eval").body
                except SyntaxError:
                    continue
            found.extend(f"{module.name}:{annotation.lineno}" for node in ast.walk(expr) if _is_dict_any(node))
    return found


def _textual_private_names() -> set[str]:
    """Private names Textual's own source defines (methods, attributes, module-level names)."""
    try:
        import textual
    except ImportError:
        return set()
    names: set[str] = set()
    for path in Path(textual.__file__).parent.rglob("*.py"):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                candidate = node.name
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                candidate = node.attr
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                candidate = node.id
            else:
                continue
            if candidate.startswith("_") and not candidate.startswith("__"):
                names.add(candidate)
    return names


def _own_private_names(modules: dict[str, Module]) -> set[str]:
    names: set[str] = set()
    for module in modules.values():
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _private_textual(modules: dict[str, Module]) -> list[str]:
    textual_names = _textual_private_names() - _own_private_names(modules)
    found = []
    for module in modules.values():
        for node in ast.walk(module.tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("textual"):
                if any(part.startswith("_") for part in (node.module or "").split(".")):
                    found.append(f"{module.name}:{node.lineno} module {node.module}")
                found.extend(
                    f"{module.name}:{node.lineno} name {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                )
            elif isinstance(node, ast.Import):
                found.extend(
                    f"{module.name}:{node.lineno} module {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("textual") and any(p.startswith("_") for p in alias.name.split("."))
                )
            elif isinstance(node, ast.Attribute) and module.name.startswith("gpuscope.tui"):
                if node.attr in textual_names:
                    found.append(f"{module.name}:{node.lineno} attribute {node.attr}")
    return found


def measure(rev: str | None) -> dict[str, list[str] | list[list[str]]]:
    with tempfile.TemporaryDirectory() as tmp:
        modules = _load(_export(rev, Path(tmp)))
    _link(modules)
    counted, excused = _in_function_imports(modules)
    return {
        "any": _any_uses(modules),
        "dict_any_annotations": _dict_any(modules),
        "import_circles": _circles(modules, every_import=True),
        "import_circles_at_import_time": _circles(modules, every_import=False),
        "in_function_imports": counted,
        "in_function_imports_of_heavy_modules": excused,
        "private_textual": _private_textual(modules),
    }


TARGETS = {"any": 350, "dict_any_annotations": 50, "import_circles": 1, "in_function_imports": 80, "private_textual": 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", action="append", help="a git revision (repeat for several); default: working tree")
    parser.add_argument(
        "--list", choices=["any", "dict", "circles", "imports", "textual"], help="print what is counted"
    )
    parser.add_argument("--json", action="store_true", help="the counts as JSON")
    args = parser.parse_args()
    revs: list[str | None] = list(args.rev) if args.rev else [None]
    for rev in revs:
        found = measure(rev)
        if args.list:
            key = {
                "any": "any",
                "dict": "dict_any_annotations",
                "circles": "import_circles",
                "imports": "in_function_imports",
                "textual": "private_textual",
            }[args.list]
            for item in found[key]:
                print(" <-> ".join(item) if isinstance(item, list) else item)
            continue
        counts = {key: len(value) for key, value in found.items()}
        if args.json:
            print(json.dumps({"rev": rev or "working tree", **counts, "targets": TARGETS}))
            continue
        print(f"{rev or 'working tree'}:")
        for key, value in counts.items():
            target = TARGETS.get(key)
            verdict = "" if target is None else f"  (target <= {target}: {'met' if value <= target else 'not met'})"
            print(f"  {key:40} {value:6,}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
