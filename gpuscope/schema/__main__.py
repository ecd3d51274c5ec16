"""``python -m gpuscope.schema [--check]``: regenerate (or check) docs/schemas/*.schema.json."""

from __future__ import annotations

import sys

from gpuscope.schema.generate import stale_schemas, write_schemas


def main(argv: list[str]) -> int:
    if "--check" in argv:
        stale = stale_schemas()
        for name in stale:
            print(f"docs/schemas/{name} is out of date; run python -m gpuscope.schema", file=sys.stderr)
        return 1 if stale else 0
    for path in write_schemas():
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
