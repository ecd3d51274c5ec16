"""Can the probe child use CUDA? Answered without importing torch into the UI process: the
installed torch's ``version.py`` names the CUDA it was built with (``cuda = None`` for a CPU
build). No Textual import."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

from gpuscope.extras import missing_probes_reason

__all__ = ["cuda_unavailable_reason"]


@functools.lru_cache(maxsize=1)
def cuda_unavailable_reason() -> str | None:
    """None when torch is installed with CUDA support, else why ``cuda:N`` cannot be probed."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return missing_probes_reason()
    version_file = Path(list(spec.submodule_search_locations)[0]) / "version.py"
    try:
        text = version_file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None  # cannot tell: let the probe child decide
    version = re.search(r"__version__\s*=\s*['\"]([^'\"]+)", text)
    cuda = re.search(r"^cuda\s*(?::[^=]*)?=\s*(.+)$", text, re.MULTILINE)
    if cuda is not None and cuda.group(1).strip() in ("None", "''", '""'):
        return f"torch {version.group(1) if version else ''} is built without CUDA".replace("  ", " ")
    return None
