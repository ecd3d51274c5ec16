"""The GEMMs of one transformer layer (grouped-query attention, gated MLP) at given token counts.

For T tokens per forward pass, hidden size d, h heads of size d/h, g key/value heads, MLP size f:

- ``qkv_proj``: [T, d] x [d, d + 2 g d/h]
- ``o_proj``: [T, d] x [d, d]
- ``gate_up_proj``: [T, d] x [d, 2 f]
- ``down_proj``: [T, f] x [f, d]
- attention (``attention = true``), batched over the h heads: ``attn_scores`` [T, d/h] x [d/h, L]
  and ``attn_values`` [T, L] x [L, d/h], where L = T for prefill (T > 64) and L = ``context``
  (the KV-cache length) for decode (T <= 64).

Small T (decode) is memory-bound, large T (prefill) compute-bound, so both ends of the roofline
appear. Each GEMM is timed as a workload (median, p10/p90, N).
"""

from __future__ import annotations

from gpuscope.schema.suites import MatmulShape, TransformerOptions

__all__ = ["transformer_shapes", "DECODE_MAX_TOKENS"]

DECODE_MAX_TOKENS = 64


def transformer_shapes(options: TransformerOptions) -> list[MatmulShape]:
    """The layer's GEMMs for every token count in ``options.tokens``."""
    d, f = options.hidden, options.ffn
    h, g = options.heads, options.kv_heads
    head = d // h
    shapes: list[MatmulShape] = []
    for tokens in options.tokens:
        phase = "decode" if tokens <= DECODE_MAX_TOKENS else "prefill"
        prefix = f"T={tokens} {phase}"
        shapes += [
            MatmulShape(m=tokens, n=d + 2 * g * head, k=d, label=f"{prefix} qkv_proj"),
            MatmulShape(m=tokens, n=d, k=d, label=f"{prefix} o_proj"),
            MatmulShape(m=tokens, n=2 * f, k=d, label=f"{prefix} gate_up_proj"),
            MatmulShape(m=tokens, n=d, k=f, label=f"{prefix} down_proj"),
        ]
        if options.attention:
            length = tokens if phase == "prefill" else options.context
            shapes += [
                MatmulShape(
                    m=tokens, n=length, k=head, batch=h, transpose="nt", label=f"{prefix} attn_scores L={length}"
                ),
                MatmulShape(m=tokens, n=head, k=length, batch=h, label=f"{prefix} attn_values L={length}"),
            ]
    return shapes
