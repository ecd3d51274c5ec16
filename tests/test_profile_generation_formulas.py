"""Issue 34.3: the formula table's rows for the ops a generation loop runs (``isin``, sampling's
``multinomial``) and the bytes of in-place cache writes (``index_put_``, ``index_copy_``), each
against a count by hand; the loop's other ops (argmax, any, comparisons, cumsum, top-k, sort,
softmax) already have rows."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from gpuscope.measuring.formulas import flop_mapping, formula_bytes, formula_for  # noqa: E402


def _flops(fn: object) -> int:
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False, custom_mapping=flop_mapping())
    with counter:
        fn()  # type: ignore[operator]
    return int(counter.get_total_flops())


def test_generation_loop_ops_all_have_a_row() -> None:
    for op in ("isin", "multinomial", "argmax", "any", "all", "eq", "ne", "lt", "gt", "ge", "le", "cumsum", "topk",
               "sort", "_softmax", "embedding", "index_copy", "index_put_"):  # fmt: skip
        assert formula_for(op) is not None, op


def test_isin_follows_torchs_choice_of_algorithm() -> None:
    vocab = torch.arange(512)
    # 1 test element < 10 x 512^0.145: brute force, 512 x 1 comparisons
    assert _flops(lambda: torch.isin(vocab, torch.tensor([2]))) == 512
    # a scalar test element: one comparison per element
    assert _flops(lambda: torch.isin(vocab.view(2, 256), 7)) == 512
    # 400 test elements >= 10 x 512^0.145 (~24): sort the 912 values, then one compare each
    tests = torch.arange(400)
    total = 512 + 400
    assert _flops(lambda: torch.isin(vocab, tests)) == total * math.ceil(math.log2(total)) + total


def test_multinomial_as_torch_draws() -> None:
    probs = torch.rand(2, 100)
    # one sample: p / q and argmax, 2 per element (the exponential draw is a random fill)
    assert _flops(lambda: torch.multinomial(probs, 1)) == 2 * 200
    # 4 samples without replacement: p / q and a top-4, 1 + ceil(log2(5)) per element
    assert _flops(lambda: torch.multinomial(probs, 4)) == 200 * (1 + 3)
    # 4 samples with replacement: normalise + cumulative sum, and a binary search per sample
    assert _flops(lambda: torch.multinomial(probs, 4, replacement=True)) == 3 * 200 + 2 * 4 * 7


def test_cache_writes_count_the_rows_written_not_the_cache() -> None:
    cache = torch.zeros(1, 2, 64, 16)  # 8 KiB
    new = torch.ones(1, 2, 1, 16)  # 128 bytes
    position = torch.tensor([5])
    assert formula_bytes("index_copy_", (cache, 2, position, new), {}, cache) == 8 + 2 * 128
    # k_out[:, :, cache_position] = key_states: index_put_ with [None, None, index]
    assert formula_bytes("index_put_", (cache, [None, None, position], new), {}, cache) == 8 + 128 + 128
    # accumulating reads the written elements too
    assert formula_bytes("index_put_", (cache, [None, None, position], new, True), {}, cache) == 8 + 128 + 2 * 128
    # a value broadcast to the indexed positions: the positions written, not the value's bytes
    rows = torch.tensor([1, 2, 3])
    written = 3 * 2 * 16 * 4  # 3 positions x 2 heads x 16 wide x fp32
    assert formula_bytes("index_put_", (cache, [None, None, rows], torch.ones(())), {}, cache) == 24 + 4 + written
