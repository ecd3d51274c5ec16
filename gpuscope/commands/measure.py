"""``gpuscope measure module:function``: time a Python function and add it to a results file as a
roofline point (the command-line face of ``gpuscope.measure``).

Arguments come from ``--args-json``: a JSON list of positional arguments, or an object
``{"args": [...], "kwargs": {...}}``. An object ``{"tensor": [shape...], "dtype": "float32"}``
(only those keys) becomes a random tensor on ``--device``, e.g.
``gpuscope measure torch:matmul --args-json '[{"tensor": [4096, 4096]}, {"tensor": [4096, 4096]}]'``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import math
import os
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpuscope.commands.options import call_user
from gpuscope.errors import ResourceError, UsageError, exception_text, message_text
from gpuscope.extras import require_probes
from gpuscope.fileio import check_output as check_writable
from gpuscope.measuring.measure import measure
from gpuscope.results import read_results
from gpuscope.schema.core import encode_json
from gpuscope.workdir import check_path, working_directory_gone

if TYPE_CHECKING:  # the type only: torch loads when the command runs
    import torch


def load_function(target: str) -> Callable[..., object]:
    """``"package.module:function"`` or ``"path/to/file.py:function"`` -> the callable.
    Raises :class:`UsageError` (exit 2) when it cannot be found, :class:`WorkingDirectoryGone`
    (exit 4) for a relative file once the working directory is gone, and :class:`UserCodeError`
    (exit 1) when the module's own code raises or exits while it is imported or looked into."""

    module_name, sep, attribute = target.rpartition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"{target!r}: expected MODULE:FUNCTION, e.g. torch:matmul or ./bench.py:step")
    is_file = module_name.endswith(".py") or os.sep in module_name
    if is_file:
        check_path(module_name)
    # Import the user's module without leaving __pycache__ folders next to their files.
    saved_dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        module = call_user(f"importing {module_name!r}", lambda: _import_module(module_name, is_file))
    finally:
        sys.dont_write_bytecode = saved_dont_write
    return call_user(target, lambda: _attribute(module, module_name, attribute))


def _import_module(module_name: str, is_file: bool) -> ModuleType:
    if is_file:
        if not os.path.isfile(module_name):
            raise UsageError(f"{module_name}: no such file")
        spec = importlib.util.spec_from_file_location("_gpuscope_measured", module_name)
        if spec is None or spec.loader is None:
            raise UsageError(f"{module_name}: cannot load as a Python module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    gone = working_directory_gone()
    if not gone and "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise  # the module was found; a module it imports was not: its code failed
        why = " (the working directory no longer exists: a module in it cannot be found)" if gone else ""
        raise UsageError(f"cannot import {module_name!r}: {exception_text(exc)}{why}") from None


def _attribute(module: ModuleType, module_name: str, attribute: str) -> Callable[..., object]:
    value: object = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)  # a module's __getattr__ is the user's code too
        except AttributeError:
            raise UsageError(f"{module_name!r} has no attribute {attribute!r}") from None
    if not callable(value):
        raise UsageError(f"{module_name + ':' + attribute!r} is not callable")
    return value


def _materialise(value: object, device: torch.device) -> object:
    import torch

    if isinstance(value, list):
        return [_materialise(item, device) for item in value]
    if isinstance(value, dict):
        if "tensor" in value and set(value) <= {"tensor", "dtype"}:
            shape = value["tensor"]
            if not isinstance(shape, list) or not all(isinstance(size, int) and size >= 0 for size in shape):
                raise UsageError(f"--args-json: tensor shape must be a list of non-negative integers, got {shape!r}")
            dtype_name = value.get("dtype", "float32")
            dtype = getattr(torch, str(dtype_name), None)
            if not isinstance(dtype, torch.dtype):
                raise UsageError(f"--args-json: unknown dtype {dtype_name!r}")
            if dtype.is_floating_point or dtype.is_complex:
                return torch.randn(*shape, device=device).to(dtype)
            return torch.randint(1, 100, tuple(shape), device=device, dtype=dtype)
        return {key: _materialise(item, device) for key, item in value.items()}
    return value


def parse_arguments(text: str | None, device: torch.device) -> tuple[tuple[object, ...], dict[str, Any]]:
    """Positional and keyword arguments from ``--args-json`` (tensors made on ``device``)."""

    if not text:
        return (), {}
    try:
        data = json.loads(text)
    except RecursionError:
        raise UsageError("--args-json is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"--args-json is not valid JSON: {exc.msg} at column {exc.colno}") from None
    if isinstance(data, dict) and set(data) <= {"args", "kwargs"} and data:
        args, kwargs = data.get("args", []), data.get("kwargs", {})
    elif isinstance(data, list):
        args, kwargs = data, {}
    else:
        raise UsageError('--args-json must be a JSON list or {"args": [...], "kwargs": {...}}')
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise UsageError('--args-json: "args" must be a list and "kwargs" an object')
    try:
        return tuple(_materialise(arg, device) for arg in args), {
            key: _materialise(value, device) for key, value in kwargs.items()
        }
    except RecursionError:
        raise UsageError("--args-json is nested too deeply") from None
    except (RuntimeError, ValueError, TypeError, OverflowError, MemoryError) as exc:  # torch: out of memory, bad shape
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ResourceError(f"--args-json: cannot make the tensor arguments on {device}: {message}") from None


def torch_device_of(device: str | None) -> torch.device:
    """``--device`` as a ``torch.device`` (cpu when not given); imports torch."""
    import torch

    try:
        return torch.device(device if device is not None else "cpu")
    except (RuntimeError, TypeError):
        raise UsageError(f"--device {device!r} is not a device (cpu, cuda, cuda:N)") from None


def check_output(path: str) -> None:
    """Raise now, with one line, when ``--output`` names a file that is not a results file or a
    folder that does not exist (the same checks :func:`append_workload` makes at the end)."""

    if path == "-":
        raise UsageError("--output -: measure adds to a results file; use --json to print the workload instead")
    check_writable(path, allow_inputs=True)  # a FIFO or device is refused before it is read
    target = Path(path)
    if target.exists():
        read_results(target)
    elif not target.parent.exists():
        raise UsageError(f"{path}: folder {target.parent} does not exist")


def run(args: argparse.Namespace) -> int:
    if args.samples < 1:
        raise UsageError(f"--samples {args.samples}: must be at least 1")

    if not all(math.isfinite(value) for value in (args.max_time, args.target_sample, args.warmup_max)):
        raise UsageError("--max-time, --target-sample and --warmup-max must be finite numbers of seconds")
    if args.max_time <= 0 or args.target_sample <= 0 or args.warmup_max < 0:
        raise UsageError("--max-time and --target-sample must be positive, --warmup-max not negative")
    for option, value in (("--flops", args.flops), ("--bytes", args.bytes_moved)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise UsageError(f"{option} {value:g}: must be a non-negative finite number")
    if args.output:
        check_output(args.output)  # a bad results file fails before torch loads and the timing runs
    require_probes("measure")
    function = load_function(args.target)
    torch_device = torch_device_of(args.device)
    positional, keywords = parse_arguments(args.args_json, torch_device)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # once per place: the user's code may warn on every call
        result = call_user(args.target, lambda: measure(
            function, *positional, kwargs=keywords, name=args.name or args.target, device=args.device,
            results=args.output, warm=not args.cold, flops=args.flops, bytes_moved=args.bytes_moved,
            samples=args.samples, max_time_s=args.max_time, target_sample_s=args.target_sample,
            warmup_max_s=args.warmup_max, telemetry=not args.no_telemetry,
        ))  # fmt: skip
    for text in dict.fromkeys(message_text(warning.message) for warning in caught):  # each once, in order
        print(f"gpuscope: warning: {text}", file=sys.stderr)
    if args.json:
        print(encode_json(result.to_workload(), indent=2).decode())
    else:
        print("\n".join(result.summary_lines()))
        if args.output is None:
            print("  not saved: add --output RESULTS.json to keep it as a roofline point")
    return 0
