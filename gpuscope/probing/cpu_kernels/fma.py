"""FMA-chain peak kernels and the dependent-add clock chain, compiled by numba.

:func:`fma_chains` runs, ``reps`` times, over one thread's accumulator array ``acc`` (a few KiB,
in L1): each element takes :data:`CHAIN` dependent ``x = x * a + b`` (contracted to one FMA) and
is stored back. The loop over elements vectorises (AVX-512/AVX2/NEON FMA on ``acc``'s lanes) and
the elements are independent, so the out-of-order core keeps enough chains in flight to cover FMA
latency x throughput; one load and one store per :data:`CHAIN` FMAs keep memory out of the way.
``contract`` only: no reassociation, so the compiler cannot shorten the chain.

:func:`add_xor_chain` is one dependent chain of integer adds and xors, :data:`CHAIN_OPS` per
iteration, 1 cycle of latency each on every x86 and Arm core: its time gives the core clock.
``c`` and ``d`` come in as arguments so the compiler cannot fold the chain.

:func:`bf16_dot_chains` (AVX512_BF16 only): numba has no bf16 type, so it calls LLVM's intrinsic
for VDPBF16PS: :data:`BF16_ACCUMULATORS` accumulators x :data:`BF16_CHAIN` dependent dot products
per repetition, ``a`` and ``b`` 32 bf16 values each (their bits as uint16).
"""

from __future__ import annotations

from gpuscope.probing.jit import require_numba

numba = require_numba()  # first: it points numba's cache at gpuscope's folder before numba loads

from llvmlite import ir  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

__all__ = [
    "CHAIN",
    "CHAIN_OPS",
    "fma_chains",
    "add_xor_chain",
    "BF16_ACCUMULATORS",
    "BF16_CHAIN",
    "BF16_FLOP_PER_INSTRUCTION",
    "bf16_dot_chains",
]

#: Dependent FMAs per element per repetition (written out below: numba caches only file-backed code).
CHAIN = 16
#: Dependent integer ops (1 cycle each) per iteration of :func:`add_xor_chain`.
CHAIN_OPS = 8

_OPTIONS = {"nogil": True, "cache": True, "boundscheck": False, "error_model": "numpy"}


@numba.njit(fastmath={"contract"}, **_OPTIONS)
def fma_chains(acc, a, b, reps):  # type: ignore[no-untyped-def]
    n = acc.shape[0]
    for _ in range(reps):
        for i in range(n):
            x = acc[i]
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            x = x * a + b
            acc[i] = x
    return 0.0


@numba.njit(**_OPTIONS)
def add_xor_chain(iterations, c, d, x):  # type: ignore[no-untyped-def]
    for _ in range(iterations):
        x = (x + c) ^ d
        x = (x + c) ^ d
        x = (x + c) ^ d
        x = (x + c) ^ d
    return x


# --- bf16: AVX512_BF16's VDPBF16PS through its LLVM intrinsic ------------------------------------
#
# numba has no bf16 type, so the bf16 kernel calls llvm.x86.avx512bf16.dpbf16ps.512 directly:
# acc[16 x f32] += a[2i]*b[2i] + a[2i+1]*b[2i+1] for 32 bf16 pairs, 64 FLOP per instruction.
# Compiled only when called: call it only where /proc/cpuinfo lists avx512_bf16.

#: Independent accumulators (zmm registers) and dependent VDPBF16PS per accumulator per repetition.
BF16_ACCUMULATORS = 12
BF16_CHAIN = 16
#: FLOP of one VDPBF16PS: 16 fp32 lanes x 2 bf16 products x (multiply + add).
BF16_FLOP_PER_INSTRUCTION = 64


class _BFloat(ir.types.Type):  # type: ignore[misc]
    """LLVM's ``bfloat`` (llvmlite.ir has no such type)."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


@intrinsic
def _dpbf16_block(typingctx, acc, a, b):  # type: ignore[no-untyped-def]
    """One repetition: BF16_CHAIN dependent VDPBF16PS on each of BF16_ACCUMULATORS 16-lane
    accumulators of ``acc`` (float32), with the 32 bf16 values (uint16 bits) of ``a`` and ``b``."""
    signature = numba.types.none(acc, a, b)

    def codegen(context, builder, sig, args):  # type: ignore[no-untyped-def]
        f32x16 = ir.VectorType(ir.FloatType(), 16)
        bf16x32 = ir.VectorType(_BFloat(), 32)
        dot = builder.module.declare_intrinsic(
            "llvm.x86.avx512bf16.dpbf16ps.512", fnty=ir.FunctionType(f32x16, [f32x16, bf16x32, bf16x32])
        )
        data = [context.make_array(sig.args[i])(context, builder, args[i]).data for i in range(3)]
        lanes = builder.bitcast(data[0], f32x16.as_pointer())
        av = builder.load(builder.bitcast(data[1], bf16x32.as_pointer()), align=2)
        bv = builder.load(builder.bitcast(data[2], bf16x32.as_pointer()), align=2)
        pointers = [builder.gep(lanes, [ir.Constant(ir.IntType(64), k)]) for k in range(BF16_ACCUMULATORS)]
        values = [builder.load(pointer, align=4) for pointer in pointers]
        for _ in range(BF16_CHAIN):
            values = [builder.call(dot, [value, av, bv]) for value in values]
        for pointer, value in zip(pointers, values):
            builder.store(value, pointer, align=4)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(**_OPTIONS)
def bf16_dot_chains(acc, a, b, reps):  # type: ignore[no-untyped-def]
    for _ in range(reps):
        _dpbf16_block(acc, a, b)  # type: ignore[call-arg]  # numba's typing context comes first
    return 0.0
