"""Suite files: shipped suites parse; every error names the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuscope.errors import BadInputError
from gpuscope.probing.suite import load_suite, parse_size, parse_suite, shipped_suites

GOOD = """\
[suite]
name = "tiny"
samples = 3

[[probe]]
kind = "matmul"
dtypes = ["fp32"]
shapes = [[64, 64, 64], {m = 8, n = 16, k = 32, batch = 2, transpose = "nt", label = "x"}]

[[probe]]
kind = "memory"
kernels = ["copy", "triad"]
working_sets = ["32KiB", 65536]
"""


def test_shipped_suites_parse() -> None:
    names = set(shipped_suites())
    assert {"quick", "full", "transformer"} <= names
    for name in names:
        suite = load_suite(name)
        assert suite.probes, name


def test_a_good_suite() -> None:
    suite = parse_suite(GOOD, "tiny.toml")
    assert suite.name == "tiny" and suite.settings.samples == 3
    shapes = suite.probes[0].options.shapes
    assert (shapes[1].batch, shapes[1].transpose, shapes[1].label) == (2, "nt", "x")
    assert suite.probes[1].options.working_sets == [32 * 1024, 65536]
    assert suite.probes[1].line == 10


def test_sizes() -> None:
    assert parse_size("64KiB") == 65536
    assert parse_size("1.5 GB") == 1_500_000_000
    assert parse_size(12) == 12
    assert parse_size("lots") is None and parse_size(True) is None and parse_size(0) is None


@pytest.mark.parametrize(
    "replace,expected",
    [
        ('dtypes = ["fp32"]', ("tiny.toml:7:", "`$.probe[0].dtypes[0]`", "fp12")),
        ('kernels = ["copy", "triad"]', ("tiny.toml:12:", "`$.probe[1].kernels[1]`", "stream")),
        ("samples = 3", ("tiny.toml:3:", "`$.suite.samples`", "expected `int` >= 1")),
        ('kind = "memory"', ("tiny.toml:11:", "`$.probe[1].kind`", "invalid value 'nonsense'")),
        ('working_sets = ["32KiB", 65536]', ("tiny.toml:13:", "field `working_sets`", "not a size")),
    ],
)
def test_schema_errors_name_file_line_and_field(replace: str, expected: tuple[str, str, str]) -> None:
    bad_values = {
        'dtypes = ["fp32"]': 'dtypes = ["fp12"]',
        'kernels = ["copy", "triad"]': 'kernels = ["copy", "stream"]',
        "samples = 3": "samples = 0",
        'kind = "memory"': 'kind = "nonsense"',
        'working_sets = ["32KiB", 65536]': 'working_sets = ["32 parsecs"]',
    }
    text = GOOD.replace(replace, bad_values[replace])
    with pytest.raises(BadInputError) as error:
        parse_suite(text, "tiny.toml")
    message = str(error.value)
    assert "\n" not in message
    for part in expected:
        assert part in message, message


def test_unknown_field_and_missing_field() -> None:
    with pytest.raises(BadInputError, match=r"tiny.toml:8: object contains unknown field `shape` - at `\$.probe\[0\]`"):
        parse_suite(GOOD.replace("shapes =", "shape ="), "tiny.toml")
    missing = r"tiny.toml:5: object missing required field `dtypes` - at `\$.probe\[0\]`"
    with pytest.raises(BadInputError, match=missing):
        parse_suite(GOOD.replace('dtypes = ["fp32"]\n', ""), "tiny.toml")


def test_toml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(GOOD.replace('kind = "memory"', 'kind = "memory'))
    with pytest.raises(BadInputError) as error:
        load_suite(str(path))
    assert f"{path}:11: invalid TOML" in str(error.value)


def test_missing_suite_file_lists_the_shipped_ones() -> None:
    with pytest.raises(BadInputError, match="no such suite file or shipped suite.*quick"):
        load_suite("does-not-exist")


def test_a_probe_can_set_its_own_sample_count() -> None:
    suite = parse_suite(GOOD + "samples = 12\n", "tiny.toml")
    assert suite.settings.samples == 3 and suite.probes[1].options.samples == 12
    assert parse_suite(GOOD, "tiny.toml").probes[1].options.samples is None
    with pytest.raises(BadInputError, match=r"tiny.toml:14: expected `int` >= 1 - at `\$.probe\[1\].samples`"):
        parse_suite(GOOD + "samples = 0\n", "tiny.toml")


def test_a_probes_sample_count_reaches_its_measurements_only() -> None:
    from gpuscope.probing.context import ProbeContext
    from gpuscope.probing.environment import MemoryBudget, parse_device
    from gpuscope.probing.runner import _with_samples
    from gpuscope.probing.timing import TimingPolicy

    device = parse_device("cpu")
    ctx = ProbeContext(device=device, budget=MemoryBudget(device), ceiling_policy=TimingPolicy(samples=3))
    seen: list[int] = []
    _with_samples(9, lambda c, emit: seen.append(c.ceiling_policy.samples))(ctx, print)
    _with_samples(None, lambda c, emit: seen.append(c.ceiling_policy.samples))(ctx, print)
    assert seen == [9, 3] and ctx.ceiling_policy.samples == 3


@pytest.mark.parametrize(
    "setting, fragment",
    [
        ("target_sample_s = inf", "expected `float` <= 86400"),
        ("warmup_max_s = nan", "expected `float` > 0.0"),
        ("max_call_s = -inf", "expected `float` > 0.0"),
        ("max_call_s = true", "expected `float`, got `bool`"),
        ("contention_threshold_percent = 1e300", "expected `float` <= 100"),
        ('workload_samples = "5"', "expected `int`, got `str`"),
    ],
)
def test_settings_that_would_break_the_run_are_refused(setting: str, fragment: str) -> None:
    """Class 7 of issue 16: every number finite and in range, one line naming line and path."""
    key = setting.split(" =")[0]
    with pytest.raises(BadInputError) as error:
        parse_suite(GOOD.replace("samples = 3", f"samples = 3\n{setting}"), "tiny.toml")
    message = str(error.value)
    assert message.startswith("tiny.toml:4: ") and fragment in message and f"`$.suite.{key}`" in message, message
    assert error.value.exit_code == 3


def test_options_are_one_type_per_probe_kind() -> None:
    from gpuscope.schema.suites import MatmulOptions, MemoryOptions

    suite = parse_suite(GOOD, "tiny.toml")
    matmul, memory = (probe.options for probe in suite.probes)
    assert isinstance(matmul, MatmulOptions) and isinstance(memory, MemoryOptions)
    assert memory.working_sets == [32 * 1024, 65536] and memory.kernels == ["copy", "triad"]
    assert matmul.libraries == ["torch", "numpy"] and matmul.dtypes == ["fp32"]
    with pytest.raises(BadInputError, match=r"tiny.toml:17: expected `int` >= 1 - at `\$.probe\[2\].sizes\[0\]`"):
        parse_suite(GOOD + '\n[[probe]]\nkind = "transfer"\nsizes = [0]\n', "tiny.toml")
    with pytest.raises(BadInputError, match=r"tiny.toml:17: field `sizes`: '1 parsec' is not a size"):
        parse_suite(GOOD + '\n[[probe]]\nkind = "transfer"\nsizes = ["1 parsec"]\n', "tiny.toml")


def test_a_results_file_given_as_a_suite_says_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "cpu.json"
    path.write_text('{"schema": "gpuscope.results", "schema_version": 1, "ceilings": []}')
    with pytest.raises(BadInputError, match=r"cpu.json is a probe results file; --suite takes a probe suite"):
        load_suite(str(path))
