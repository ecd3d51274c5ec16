"""Xid errors through whole commands: ``gpuscope log`` (JSON lines and CSV) in a subprocess on
the fake NVML chosen by ``GPUSCOPE_FAKE_NVML``, and the scenario keys that inject them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.errors import UsageError
from gpuscope.telemetry.logfile import read_log
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.testing.scenarios import build_fake, parse_scenario

REPO = Path(__file__).resolve().parent.parent


def _log(tmp_path: Path, scenario: str, name: str) -> tuple[Path, str]:
    output = tmp_path / name
    env = {**os.environ, "PYTHONPATH": str(REPO), "GPUSCOPE_FAKE_NVML": scenario,
           "GPUSCOPE_CONFIG_DIR": str(tmp_path)}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "gpuscope", "log", "--interval", "0.2", "--duration", "1.6", "-o", str(output)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return output, done.stderr


@pytest.mark.parametrize("name", ["run.jsonl", "run.csv"])
def test_log_records_xid_events_and_their_alert(tmp_path: Path, name: str) -> None:
    output, stderr = _log(tmp_path, "gpus=2xh200,xid=79@0.3:1;13*3@0.3:0,events_error=NotSupported@0", name)
    samples = list(read_log(output))
    assert len(samples) >= 4
    seen = [s for s in samples if isinstance(s.gpus[1].xid_events, list) and s.gpus[1].xid_events]
    assert len(seen) == 1, "an Xid is logged once, in the interval it was read"
    event = seen[0].gpus[1].xid_events[0]  # type: ignore[index]
    assert (event.xid, event.count, event.meaning) == (79, 1, "GPU has fallen off the bus")
    after = samples[samples.index(seen[0]) :]
    assert all(any(line.startswith("critical xid GPU 1: Xid 79") for line in s.alerts) for s in after)
    assert all(isinstance(s.gpus[1].xid_recent, list) and s.gpus[1].xid_recent for s in after)
    refused = samples[-1].gpus[0].xid_events
    assert isinstance(refused, Unavailable) and refused.reason is Reason.NOT_SUPPORTED
    assert "alert: CRITICAL GPU 1: Xid 79 GPU has fallen off the bus" in stderr


def test_scenario_xid_keys_parse_and_reject_bad_values() -> None:
    scenario = parse_scenario("gpus=2xh200,xid=79@2.0:1;13*500@1,events_error=NoPermission@1")
    assert scenario.xids == [(79, 1, 2.0, 1), (13, 500, 1.0, 0)]
    assert scenario.events_error == ("NoPermission", 1)
    fake = build_fake(scenario)
    assert [(x.gpu, x.xid, x.count) for x in fake.events.pending] == [(1, 79, 1), (0, 13, 500)]
    assert "nvmlDeviceRegisterEvents" in fake.gpus[1].errors and "nvmlDeviceRegisterEvents" not in fake.gpus[0].errors
    for bad, fragment in [
        ("xid=79", "XID[*COUNT]@SECONDS[:GPU]"),
        ("xid=79@1:5", "names GPU 5"),
        ("xid=13*0@1", "between 1"),
        ("events_error=Nope", "not an NVML error name"),
        ("events_error=NotSupported@x", "NAME[@GPU]"),
    ]:
        with pytest.raises(UsageError, match=fragment.replace("[", r"\[").replace("*", r"\*")):
            build_fake(parse_scenario(bad))
