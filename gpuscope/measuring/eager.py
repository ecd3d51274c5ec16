"""Counting a step without de-compiling it: a ``torch.compile``'d callable entered under a dispatch
mode (FlopCounterMode) is skipped by Dynamo for good, so the counting step runs with
``torch.compiler.set_stance("force_eager")`` (the full story: :mod:`gpuscope.profiling.compiled`).

torch is imported inside the function only.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator

__all__ = ["eager_counting"]


@contextlib.contextmanager
def eager_counting() -> Iterator[None]:
    """Run the block with every ``torch.compile``'d callable running its original (eager) code,
    without converting, recompiling or marking a compiled frame (``torch.compiler.set_stance
    ("force_eager")``); the stance before is restored on exit. Use around a step run under
    dispatch modes (FLOP counting): see the module docstring."""
    import torch

    set_stance = getattr(getattr(torch, "compiler", None), "set_stance", None)
    # No compiled callable exists before Dynamo is loaded; loading it only to set the stance would
    # create Inductor's cache folder under TMPDIR for a program that never compiles.
    compiling_loaded = "torch._dynamo" in sys.modules
    with contextlib.ExitStack() as stack:
        if set_stance is not None and compiling_loaded:
            stack.enter_context(set_stance("force_eager"))
        # The counting step's module tracker installs global module hooks (removed when the step
        # ends): torch warns that they fire twice for an OptimizedModule. That one warning is
        # ignored; the filter is removed afterwards, any filter the step itself added is kept
        # (warnings.catch_warnings would put back the whole list).
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        entry = warnings.filters[0]
        try:
            yield
        finally:
            filters = warnings.filters
            if isinstance(filters, list):  # typeshed says Sequence; it is the module's list
                with contextlib.suppress(ValueError):
                    filters.remove(entry)
