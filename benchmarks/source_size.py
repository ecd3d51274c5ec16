"""Size of the package's source, raw and independent of formatting.

Raw line counts move when code is only re-wrapped (a call collapsed onto one line, a table
packed under ``# fmt: skip``), so two measures that formatting cannot move come with them:
``statements`` (the AST's statement nodes) and ``tokens`` (Python tokens that are not comments,
newlines or indentation; a docstring is one token). The normalised line counts format every
file with ruff, magic trailing commas ignored, then count lines that are neither blank nor
comments (``# fmt: skip`` regions stay as written, so they still reward packing).

    python benchmarks/source_size.py            # the working tree
    python benchmarks/source_size.py --rev HEAD~3   # a commit, for a before/after pair
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _export(rev: str | None, target: Path) -> Path:
    """Copy gpuscope/ (of `rev`, or the working tree) under target; return the copy's root."""
    package = target / "gpuscope"
    if rev is None:
        files = sorted((ROOT / "gpuscope").rglob("*.py"))
        for path in files:
            dest = target / path.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(path.read_bytes())
        return package
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "gpuscope"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return package


def _count(package: Path) -> tuple[int, int, int]:
    """(files, raw lines, code lines): code lines are neither blank nor comment-only."""
    files = sorted(package.rglob("*.py"))
    raw = code = 0
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        raw += len(lines)
        code += sum(1 for line in lines if line.strip() and not line.lstrip().startswith("#"))
    return len(files), raw, code


_LAYOUT_TOKENS = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def _syntax_size(package: Path) -> tuple[int, int]:
    """(statements, tokens) of every file under package: neither moves when code is re-wrapped."""
    statements = tokens = 0
    for path in sorted(package.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        statements += sum(isinstance(node, ast.stmt) for node in ast.walk(ast.parse(text)))
        readline = io.StringIO(text).readline
        tokens += sum(token.type not in _LAYOUT_TOKENS for token in tokenize.generate_tokens(readline))
    return statements, tokens


def measure(rev: str | None) -> dict[str, int]:
    with tempfile.TemporaryDirectory() as tmp:
        package = _export(rev, Path(tmp))
        files, raw, _ = _count(package)
        statements, tokens = _syntax_size(package)
        ruff = Path(sys.executable).with_name("ruff")
        subprocess.run(
            [
                str(ruff),
                "format",
                "--quiet",
                "--no-cache",
                "--config",
                str(ROOT / "pyproject.toml"),
                "--config",
                "format.skip-magic-trailing-comma = true",
                str(package),
            ],
            check=True,
        )
        _, normalised_raw, normalised_code = _count(package)
    return {
        "files": files,
        "lines": raw,
        "statements": statements,
        "tokens": tokens,
        "normalised_lines": normalised_raw,
        "normalised_code_lines": normalised_code,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", action="append", help="a git revision (repeat for several); default: working tree")
    args = parser.parse_args()
    revs: list[str | None] = list(args.rev) if args.rev else [None]
    for rev in revs:
        sizes = measure(rev)
        label = rev or "working tree"
        print(f"{label:>14}: " + ", ".join(f"{key} {value:,}" for key, value in sizes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
