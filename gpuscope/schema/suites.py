"""Probe suites (TOML) as declared types: the timing settings and one options type per probe kind.

A suite file has a ``[suite]`` table (name, description and :class:`SuiteSettings`) and
``[[probe]]`` tables, each decoded by ``kind`` into :class:`MatmulOptions`, :class:`MemoryOptions`,
:class:`TransferOptions`, :class:`CollectiveOptions` or :class:`TransformerOptions`. A suite is
written by hand, so unknown keys are refused (a typo would silently change a run); every number is
finite and in range (``target_sample_s = inf`` and ``warmup_max_s = nan`` are refused).

After decoding, sizes are bytes (``int``) and matmul shapes are :class:`MatmulShape`
(``__post_init__`` normalises the TOML forms). The probes' vocabulary (dtypes, kernels, directions,
ops) is declared here, at the floor, and the probes take it from here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

import msgspec

from gpuscope.schema.core import DetailMap

__all__ = [
    "PROBE_KINDS",
    "MATMUL_DTYPES",
    "KERNELS",
    "DIRECTIONS",
    "OPS",
    "MatmulDtype",
    "Kernel",
    "Direction",
    "Op",
    "MatmulShape",
    "SuiteSettings",
    "SuiteTable",
    "ProbeOptions",
    "MatmulOptions",
    "MemoryOptions",
    "TransferOptions",
    "CollectiveOptions",
    "TransformerOptions",
    "PeakOptions",
    "PeakDtype",
    "SuiteFile",
    "parse_size",
]

PROBE_KINDS = ("matmul", "memory", "transfer", "collective", "transformer", "peak")
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|KiB|MiB|GiB)?\s*$")
_SIZE_SCALE = {None: 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
_MAX_SIZE_BYTES = 2**50  # 1 PiB: beyond any device memory

PositiveInt = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
#: A duration setting: finite, above zero, at most a day.
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
Percent = Annotated[float, msgspec.Meta(gt=0, le=100)]
Size = Annotated[int, msgspec.Meta(ge=1, le=_MAX_SIZE_BYTES)] | str
DeviceType = Literal["cpu", "cuda"]
Transpose = Literal["nn", "nt", "tn", "tt"]
MatmulDtype = Literal["fp64", "fp32", "tf32", "bf16", "fp16", "fp8"]
Kernel = Literal["copy", "scale", "add", "triad", "read"]
Direction = Literal["h2d", "d2h", "d2d"]
Op = Literal["allreduce", "allgather", "reducescatter", "alltoall", "broadcast"]
#: The probes' vocabulary, as the tuples they iterate: one list each, declared by the types above.
MATMUL_DTYPES: tuple[MatmulDtype, ...] = get_args(MatmulDtype)
KERNELS: tuple[Kernel, ...] = get_args(Kernel)
DIRECTIONS: tuple[Direction, ...] = get_args(Direction)
OPS: tuple[Op, ...] = get_args(Op)


@dataclass(frozen=True)
class MatmulShape:
    """C[batch, M, N] = op(A)[batch, M, K] @ op(B)[batch, K, N]; ``transpose`` is two letters,
    ``n`` or ``t`` for A and B (``t``: the operand is stored transposed)."""

    m: int
    n: int
    k: int
    batch: int = 1
    transpose: str = "nn"
    label: str = ""

    def describe(self) -> str:
        core = f"{self.m}x{self.n}x{self.k}"
        if self.batch != 1:
            core = f"{self.batch}x{core}"
        if self.transpose != "nn":
            core += f" {self.transpose}"
        return f"{self.label} {core}".strip()

    @property
    def flops(self) -> int:
        """FLOPs of the GEMM: 2·batch·M·N·K (one multiply and one add per term; dense)."""
        return 2 * self.batch * self.m * self.n * self.k

    def parameters(self) -> dict[str, int | str | None]:
        """The shape as a measurement's ``parameters`` hold it."""
        return dict(batch=self.batch, m=self.m, n=self.n, k=self.k, transpose=self.transpose, label=self.label or None)


def parse_size(value: object) -> int | None:
    """``4096``, ``"64KiB"``, ``"1.5 GB"`` -> bytes; None when not a size (or 0, or over 1 PiB)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= _MAX_SIZE_BYTES else None
    if isinstance(value, str):
        match = _SIZE_RE.match(value)
        if match:
            size = int(float(match.group(1)) * _SIZE_SCALE[match.group(2)])
            return size if 0 < size <= _MAX_SIZE_BYTES else None
    return None


def _sizes(values: Sequence[object], field: str) -> list[int]:
    out = []
    for value in values:
        size = parse_size(value)
        if size is None:
            raise ValueError(
                f'field `{field}`: {value!r} is not a size (bytes, or a string like "64KiB", "1MiB", "1GB")'
            )
        out.append(size)
    return out


def _listify(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value)


class SuiteSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Timing settings of a suite (seconds; ``samples`` is N)."""

    samples: PositiveInt = 5
    target_sample_s: PositiveSeconds = 0.02
    warmup_max_s: PositiveSeconds = 2.0
    workload_samples: PositiveInt = 15
    workload_target_sample_s: PositiveSeconds = 0.02
    max_call_s: PositiveSeconds = 1.0
    contention_retries: Annotated[int, msgspec.Meta(ge=0, le=100)] = (
        2  # CPU: re-time while other processes took the cores
    )
    contention_threshold_percent: Percent = 10.0
    contention_retry_budget_s: PositiveSeconds = 30.0  # total seconds a run may spend on such retries

    def to_dict(self) -> DetailMap:
        """The settings as a plain dict (the ``settings`` object of a results file)."""
        return {field: getattr(self, field) for field in SuiteSettings.__struct_fields__}


class SuiteTable(SuiteSettings, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``[suite]`` table: a name, a description and the settings."""

    name: Annotated[str, msgspec.Meta(min_length=1)] | None = None
    description: str = ""

    def settings(self) -> SuiteSettings:
        """The settings part."""
        return SuiteSettings(**{field: getattr(self, field) for field in SuiteSettings.__struct_fields__})


class ProbeOptions(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, tag_field="kind"):
    """Fields every ``[[probe]]`` table may have."""

    devices: DeviceType | list[DeviceType] = msgspec.field(default_factory=lambda: ["cpu", "cuda"])
    label: str = ""

    def __post_init__(self) -> None:
        self._lists("devices")

    def _lists(self, *fields: str) -> None:
        """Make each field a list (a value given alone becomes a list of one); none may be empty."""
        for field in fields:
            setattr(self, field, _listify(getattr(self, field)))
        if not all(getattr(self, field) for field in fields):
            names = " and ".join(f"`{field}`" for field in fields)
            raise ValueError(f"field{'s' if len(fields) > 1 else ''} {names} must not be empty")


class ShapeTable(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A matmul shape given as a table."""

    m: PositiveInt
    n: PositiveInt
    k: PositiveInt
    batch: PositiveInt | None = None
    transpose: Transpose | None = None
    label: str = ""


class MatmulOptions(ProbeOptions, tag="matmul", kw_only=True, forbid_unknown_fields=True):
    """GEMM ceilings (``role = "ceiling"``) or workload points (``role = "workload"``)."""

    dtypes: MatmulDtype | list[MatmulDtype]
    shapes: Annotated[
        list[Annotated[list[PositiveInt], msgspec.Meta(min_length=3, max_length=4)] | ShapeTable],
        msgspec.Meta(min_length=1),
    ]
    batch: PositiveInt = 1
    transpose: Transpose = "nn"
    role: Literal["ceiling", "workload"] = "ceiling"
    libraries: Literal["torch", "numpy"] | list[Literal["torch", "numpy"]] = msgspec.field(
        default_factory=lambda: ["torch", "numpy"]
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lists("dtypes", "libraries")
        self.shapes = self.matmul_shapes()  # type: ignore[assignment]  # MatmulShape now

    def matmul_shapes(self) -> list[MatmulShape]:
        """The shapes as :class:`MatmulShape` (a table's batch and transpose, else the probe's)."""
        shapes: list[MatmulShape] = []
        for shape in self.shapes:
            if isinstance(shape, MatmulShape):
                shapes.append(shape)
            elif isinstance(shape, ShapeTable):
                batch, transpose = shape.batch or self.batch, shape.transpose or self.transpose
                shapes.append(MatmulShape(shape.m, shape.n, shape.k, batch, transpose, shape.label))
            elif len(shape) == 4:
                shapes.append(MatmulShape(m=shape[1], n=shape[2], k=shape[3], batch=shape[0], transpose=self.transpose))
            else:
                shapes.append(MatmulShape(shape[0], shape[1], shape[2], self.batch, self.transpose))
        return shapes


class MemoryOptions(ProbeOptions, tag="memory", kw_only=True, forbid_unknown_fields=True):
    """STREAM-like kernels over working sets (``auto``: one per cache level and DRAM)."""

    kernels: Kernel | list[Kernel] = msgspec.field(default_factory=lambda: list(get_args(Kernel)))
    working_sets: Literal["auto", "sweep"] | Annotated[list[Size], msgspec.Meta(min_length=1)] = "auto"
    dtype: Literal["fp64", "fp32", "bf16", "fp16"] | None = None
    dram_array_bytes: Size | None = None
    samples: PositiveInt | None = None  # this probe's N, instead of the suite's

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lists("kernels")
        if isinstance(self.working_sets, list):
            self.working_sets = _sizes(self.working_sets, "working_sets")  # type: ignore[assignment]  # bytes now
        if self.dram_array_bytes is not None:
            self.dram_array_bytes = _sizes([self.dram_array_bytes], "dram_array_bytes")[0]

    def working_sets_bytes(self) -> str | list[int]:
        """``auto``, ``sweep`` or the footprints in bytes."""
        return self.working_sets if isinstance(self.working_sets, str) else _sizes(self.working_sets, "working_sets")

    def dram_array_size_bytes(self) -> int | None:
        """``dram_array_bytes`` in bytes (None: the probe's default)."""
        size = self.dram_array_bytes
        return None if size is None else _sizes([size], "dram_array_bytes")[0]


class TransferOptions(ProbeOptions, tag="transfer", kw_only=True, forbid_unknown_fields=True):
    """Host-device and device-device copies."""

    directions: Direction | list[Direction] = msgspec.field(default_factory=lambda: list(get_args(Direction)))
    host_memory: Literal["pinned", "pageable"] | list[Literal["pinned", "pageable"]] = msgspec.field(
        default_factory=lambda: ["pinned", "pageable"]
    )
    sizes: Annotated[list[Size], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["1MiB", "16MiB", "256MiB"]
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lists("directions", "host_memory")
        self.sizes = _sizes(self.sizes, "sizes")  # type: ignore[assignment]  # bytes now

    def sizes_bytes(self) -> list[int]:
        """The copy sizes in bytes."""
        return _sizes(self.sizes, "sizes")


class CollectiveOptions(ProbeOptions, tag="collective", kw_only=True, forbid_unknown_fields=True):
    """Collectives as nccl-tests times them (docs/interconnect.md): algbw and busbw per op and size."""

    ops: Op | list[Op] = msgspec.field(default_factory=lambda: list(get_args(Op)))
    sizes: Annotated[list[Size], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["64KiB", "4MiB", "64MiB"]
    )
    world_size: PositiveInt | None = None
    samples: PositiveInt | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lists("ops")
        self.sizes = _sizes(self.sizes, "sizes")  # type: ignore[assignment]  # bytes now

    def sizes_bytes(self) -> list[int]:
        """The buffer sizes in bytes."""
        return _sizes(self.sizes, "sizes")


class TransformerOptions(ProbeOptions, tag="transformer", kw_only=True, forbid_unknown_fields=True):
    """The GEMMs of one transformer layer, prefill and decode, as workload points."""

    hidden: PositiveInt = 4096
    ffn: PositiveInt = 14336
    heads: PositiveInt = 32
    kv_heads: PositiveInt = 8
    context: PositiveInt = 2048
    tokens: Annotated[list[PositiveInt], msgspec.Meta(min_length=1)] = msgspec.field(default_factory=lambda: [1, 2048])
    dtypes: MatmulDtype | list[MatmulDtype] = msgspec.field(default_factory=lambda: ["bf16"])
    attention: bool = True
    model: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.dtypes = _listify(self.dtypes)
        if self.hidden % self.heads:
            raise ValueError(f"field `heads`: hidden {self.hidden} is not divisible by heads {self.heads}")
        if self.heads % self.kv_heads:
            raise ValueError(f"field `kv_heads`: heads {self.heads} is not divisible by kv_heads {self.kv_heads}")


PeakDtype = Literal["fp64", "fp32", "bf16", "fp16"]
PeakKernel = Literal["fma", "l2", "dram"]


class PeakOptions(ProbeOptions, tag="peak", kw_only=True, forbid_unknown_fields=True):
    """FLOP peaks from FMA chains (gpuscope.probing.peaks): numba kernels on a CPU, Triton on a GPU;
    each gives the compute roof ``<dtype>.fma`` beside the GEMM roof."""

    dtypes: PeakDtype | list[PeakDtype] = msgspec.field(default_factory=lambda: ["fp64", "fp32"])
    #: ``fma``: the FLOP peaks of ``dtypes``; ``l2``, ``dram``: Triton read/copy/triad bandwidth (GPU only)
    kernels: PeakKernel | list[PeakKernel] = msgspec.field(default_factory=lambda: ["fma"])
    samples: PositiveInt | None = None  # this probe's N, instead of the suite's

    def __post_init__(self) -> None:
        super().__post_init__()
        self._lists("dtypes", "kernels")


AnyProbe = MatmulOptions | MemoryOptions | TransferOptions | CollectiveOptions | TransformerOptions | PeakOptions


class SuiteFile(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A whole suite file."""

    probe: Annotated[list[AnyProbe], msgspec.Meta(min_length=1)]
    suite: SuiteTable = msgspec.field(default_factory=SuiteTable)
