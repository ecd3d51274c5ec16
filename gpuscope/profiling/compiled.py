"""Compiled models (``torch.compile``): count them without changing them, and read what Inductor
generated.

**Why counting de-compiled a model.** The counting step runs under dispatch modes
(FlopCounterMode and gpuscope's recorder). When a compiled frame is entered under a dispatch mode,
its guards fail (the mode changes the dispatch keys), Dynamo is asked to convert the frame, sees a
"non-infra torch dispatch mode" and returns *skip*, and that skip is applied to the frame's code
object for good: every later call of that code, by any module of the class, ran eager. The counting
step therefore runs with ``torch.compiler.set_stance("force_eager")`` (:func:`eager_counting`):
Dynamo's frame callback is off for the step, no frame is converted or marked, and the ops the
dispatch modes see are the eager ops of the same step (the same arithmetic the compiled graph
does). The user's compiled callable, its caches and its guards are not touched.

**Reading the generated code.** Inductor writes each compiled graph as a Python module
(``/tmp/torchinductor_<user>/xx/cxxx.py``) whose ``call`` runs the graph: fused kernels
(``cpp_fused_gelu_native_layer_norm_0(...)`` on CPU, ``triton_poi_fused_gelu_0.run(...)`` on a GPU,
named after the aten ops they fuse) and extern kernels (``extern_kernels.addmm(...)``), between
buffer allocations that give every tensor's shape, stride and dtype. :func:`read_graph_source`
parses that file (its path is in the profiler's Python events) into :class:`GraphSource`.

torch is imported inside functions only.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpuscope.measuring.eager import eager_counting

__all__ = [
    "GraphSource",
    "KernelCall",
    "compiled_graphs_seen",
    "eager_counting",
    "kernel_ops",
    "python_stack_wanted",
    "read_graph_source",
    "run_eager",
]


_EAGER_RUNS = [0]  # run_eager() blocks open


@contextlib.contextmanager
def run_eager() -> Iterator[None]:
    """Run the block as if nothing were compiled (``torch.compiler.set_stance("force_eager")``): the
    eager side of ``--compare-eager``. Profiles made inside it skip the Python stack
    (:func:`python_stack_wanted`)."""
    _EAGER_RUNS[0] += 1
    try:
        with eager_counting():
            yield
    finally:
        _EAGER_RUNS[0] -= 1


def python_stack_wanted() -> bool:
    """Whether profiled steps should record the Python stack: compiled graphs exist in this process
    (the stack shows each fused C++ kernel) and no :func:`run_eager` block is open."""
    return _EAGER_RUNS[0] == 0 and compiled_graphs_seen() > 0


def compiled_graphs_seen() -> int:
    """How many graphs ``torch.compile`` has compiled in this process (0 when Dynamo was never
    imported). Read from Dynamo's counters (``torch._dynamo.utils.counters``, no public API says
    this), read only, never changed."""
    import sys

    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    try:
        return int(counters["stats"]["unique_graphs"]) if counters is not None else 0
    except (KeyError, TypeError, ValueError):
        return 0


# --- the generated module ----------------------------------------------------------------------

_DTYPE_BYTES = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "complex64": 8, "complex128": 16,
}  # fmt: skip

_ALLOC = re.compile(
    r"^\s*(\w+) = empty_strided_\w+\(\(([\d, ]*)\), \(([\d, ]*)\), torch\.(\w+)"
)  # buf0 = empty_strided_cpu((8, 64), (64, 1), torch.float32)
_ALIAS = re.compile(r"^\s*(\w+) = (\w+); del \w+\s*# reuse")
_REINTERPRET = re.compile(r"^\s*(\w+) = reinterpret_tensor\((\w+), \(([\d, ]*)\)")
_INPUT = re.compile(r"^\s*(\w+) = rand_strided\(\(([\d, ]*)\), \(([\d, ]*)\), device='\w+', dtype=torch\.(\w+)\)")
_KERNEL = re.compile(r"^\s*(cpp_fused_\w+|triton_\w+|cpp_\w+)(?:\.run)?\((.*)\)\s*$")
_EXTERN = re.compile(r"^\s*(?:extern_kernels|aten|torch\.ops\.aten)\.(\w+)(?:\.\w+)?\((.*)\)\s*$")
_NAME = re.compile(r"\b(buf\d+|arg\d+_\d+|primals_\d+|tangents_\d+|getitem\w*|\w+_\d+)\b")


@dataclass(frozen=True)
class Buffer:
    """A tensor of the generated code: shape, element size and dtype name (``"float32"``)."""

    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def nbytes(self) -> int:
        """Bytes the buffer spans (its strides' extent x element size)."""
        if not self.shape or any(size == 0 for size in self.shape):
            return _DTYPE_BYTES.get(self.dtype, 4) if not self.shape else 0
        span = 1 + sum((size - 1) * abs(stride) for size, stride in zip(self.shape, self.strides))
        return span * _DTYPE_BYTES.get(self.dtype, 4)


@dataclass(frozen=True)
class KernelCall:
    """One call in the generated ``call`` function, in the order they run."""

    name: str  # "cpp_fused_gelu_native_layer_norm_0", "addmm" (an extern kernel)
    fused: bool  # a kernel Inductor generated (C++ or Triton); False: an extern aten kernel
    buffers: tuple[Buffer, ...]  # the distinct tensors passed to it, whose shapes are known
    line: int  # line in the generated file

    @property
    def bytes(self) -> int:
        """Lower bound: each distinct tensor it reads or writes, once (intermediates kept inside the
        fused loop are not counted: that is what fusion saves)."""
        return sum(buffer.nbytes for buffer in self.buffers)

    @property
    def elements(self) -> int:
        """Elements of the largest tensor it touches (the loop's extent)."""
        return max((buffer.numel for buffer in self.buffers), default=0)

    @property
    def largest(self) -> Buffer | None:
        return max(self.buffers, key=lambda buffer: buffer.numel, default=None)

    @property
    def largest_float(self) -> Buffer | None:
        """The largest floating-point tensor it touches (whose dtype names the kernel's roof)."""
        floats = [buffer for buffer in self.buffers if buffer.dtype.startswith(("float", "bfloat", "complex"))]
        return max(floats, key=lambda buffer: buffer.numel, default=None)


@dataclass(frozen=True)
class GraphSource:
    """What one generated module says: its kernels in call order, forward or backward."""

    path: str
    kernels: tuple[KernelCall, ...]
    backward: bool
    aot_id: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    copy_only: frozenset[str] = frozenset()  # C++ kernels whose loops only load and store (layout copies)

    @property
    def fused(self) -> tuple[KernelCall, ...]:
        return tuple(kernel for kernel in self.kernels if kernel.fused)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.replace(" ", "").split(",") if part)


@functools.lru_cache(maxsize=256)
def read_graph_source(path: str) -> GraphSource | None:
    """Parse an Inductor output module (the file behind ``<path>(N): call`` in the profiler's
    Python events); None when it cannot be read or has no ``call``."""
    try:
        with open(path, encoding="utf-8") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    aot_id = ""
    if lines and lines[0].startswith("# AOT ID:"):
        aot_id = lines[0].split(":", 1)[1].strip()
    inputs: dict[str, Buffer] = {}
    for line in lines:
        found = _INPUT.match(line)
        if found:
            inputs[found[1]] = Buffer(_ints(found[2]), _ints(found[3]), found[4])
    start = next((i for i, line in enumerate(lines) if re.match(r"^\s*def call\(", line)), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    buffers: dict[str, Buffer] = dict(inputs)
    kernels: list[KernelCall] = []
    for number in range(start + 1, len(lines)):
        line = lines[number]
        stripped = line.strip()
        if stripped and len(line) - len(line.lstrip()) <= indent:
            break  # the end of call()
        if not stripped or stripped.startswith("#"):
            continue
        found = _ALLOC.match(line)
        if found:
            buffers[found[1]] = Buffer(_ints(found[2]), _ints(found[3]), found[4])
            continue
        found = _ALIAS.match(line)
        if found:
            if found[2] in buffers:
                buffers[found[1]] = buffers[found[2]]
            continue
        found = _REINTERPRET.match(line)
        if found:
            if found[2] in buffers:
                buffers[found[1]] = buffers[found[2]]
            continue
        kernel = _KERNEL.match(line)
        extern = None if kernel else _EXTERN.match(line)
        match = kernel or extern
        if match is None:
            continue
        seen: list[Buffer] = []
        names: list[str] = []
        for name in _NAME.findall(match[2]):
            if name in buffers and name not in names:
                names.append(name)
                seen.append(buffers[name])
        kernels.append(KernelCall(name=match[1], fused=kernel is not None, buffers=tuple(seen), line=number + 1))
    return GraphSource(
        path=path, kernels=tuple(kernels), backward="backward" in aot_id, aot_id=aot_id,
        copy_only=frozenset(name for name, body in _cpp_bodies(lines).items() if _moves_only(body)),
    )  # fmt: skip


_CPP_DEF = re.compile(r"^(cpp_fused_\w+) = async_compile\.cpp_pybinding\(")
_TMP = re.compile(r"\bauto (tmp\d+) = (.*);\s*$")
_MOVE = re.compile(
    r"^(?:at::vec::Vectorized<\w+>::loadu\(.*\)|in_ptr\d+\[.*\]|in_out_ptr\d+\[.*\]|tmp\d+|"
    r"static_cast<\w+>\(tmp\d+\)|at::vec::convert<\w+>\(tmp\d+\))$"
)


def _cpp_bodies(lines: list[str]) -> dict[str, list[str]]:
    """The C++ source of each ``cpp_fused_*`` kernel of a generated module."""
    bodies: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lines:
        found = _CPP_DEF.match(line)
        if found:
            current = bodies.setdefault(found[1], [])
            continue
        if current is not None:
            if line.startswith("''')"):
                current = None
            else:
                current.append(line)
    return bodies


def _moves_only(body: list[str]) -> bool:
    """Whether a kernel's values are only loaded and stored (a copy or a layout change): every
    ``auto tmpN = ...`` is a load or a plain conversion of another tmp, and there is at least one."""
    values = [found[2].strip() for found in map(_TMP.search, body) if found]
    arithmetic = any(_ARITHMETIC.search(line) for line in body if "alignas" not in line)
    return bool(values) and not arithmetic and all(_MOVE.match(value) for value in values)


_ARITHMETIC = re.compile(r"tmp_acc|welford|reduc|(?<!auto )\btmp\d+\s*=[^=]")  # accumulators, reassigned values


_PREFIX = re.compile(r"^(?:cpp|triton_(?:poi|red|per|tem|for|mix)|triton|cpp_kernel)_(?:fused_)?")


@functools.lru_cache(maxsize=4096)
def kernel_ops(kernel_name: str, vocabulary: frozenset[str]) -> tuple[tuple[str, ...], str]:
    """The aten ops a fused kernel's name lists (Inductor names a kernel after the original aten
    ops it fuses, sorted, at most ``kernel_name_max_ops`` of them: ``cpp_fused_gelu_native_layer_norm_0``
    -> ``["gelu", "native_layer_norm"]``), split by longest match against ``vocabulary`` (aten op
    names without namespace). Returns the ops and what could not be split ("" when all could)."""
    body = _PREFIX.sub("", kernel_name)
    body = re.sub(r"(?:^|_)\d+$", "", body)
    ops: list[str] = []
    rest = body
    while rest:
        rest = (
            rest.lstrip("_") if not any(rest.startswith(name) for name in vocabulary if name.startswith("_")) else rest
        )
        if not rest:
            break
        best = ""
        for name in vocabulary:
            if len(name) > len(best) and rest.startswith(name) and (len(rest) == len(name) or rest[len(name)] == "_"):
                best = name
        if not best:
            return tuple(ops), rest
        ops.append(best)
        rest = rest[len(best) :]
        rest = rest[1:] if rest.startswith("_") else rest
    return tuple(ops), ""
