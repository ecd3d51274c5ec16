"""Xid errors end to end: the real NvmlCollector and pynvml wrappers against the fake NVML's event
symbols, then the sample's alerts, the exporter's text and the log record."""

from __future__ import annotations

import dataclasses
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from support.samples import make_sample

from gpuscope.exporter.server import SampleCollector
from gpuscope.telemetry.alerts import annotate
from gpuscope.telemetry.nvml.collector import GpuSide, NvmlCollector
from gpuscope.telemetry.nvml.events import MAX_ENTRIES_PER_GPU, MAX_READS_PER_SAMPLE, RECENT_S
from gpuscope.telemetry.records import Sample, XidEvent, record_to_dict
from gpuscope.telemetry.values import Reason
from gpuscope.telemetry.wire import decode_record
from gpuscope.testing.fake_nvml import FakeClock, FakeGpu, FakeNvml, opened_collector, reason_of


def _fake(*gpus: FakeGpu) -> FakeNvml:
    return FakeNvml.with_gpus(list(gpus) or [FakeGpu.h200(), FakeGpu.h200()], clock=FakeClock())


def _tick(fake: FakeNvml, collector: NvmlCollector, seconds: float = 1.0) -> GpuSide:
    fake.advance(seconds)
    return collector.sample()


def _sample(side: GpuSide) -> Sample:
    sample = make_sample(gpus=0, timestamp=time.time())
    sample.gpus = side.gpus
    return sample


def _xids(events: object) -> dict[int, int]:
    assert isinstance(events, list), f"expected a list of Xid events, got {events!r}"
    return {event.xid: event.count for event in events}


def test_quiet_sample_costs_one_wait_call_and_says_no_xid() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.reset_calls()
        side = _tick(fake, collector)
        event_calls = {name: n for name, n in fake.calls.items() if "Event" in name and "Reasons" not in name}
        assert event_calls == {"nvmlEventSetWait_v2": 1}
        for gpu in side.gpus:
            assert gpu.xid_events == [] and gpu.xid_events_dropped == 0 and gpu.xid_recent == []


def test_injected_xid_reaches_sample_alert_exporter_and_log_record() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.inject_xid(1, 79)
        fake.inject_xid(0, 13, count=3)
        side = _tick(fake, collector)
    gpu0, gpu1 = side.gpus
    assert _xids(gpu1.xid_events) == {79: 1} and _xids(gpu0.xid_events) == {13: 3}
    assert isinstance(gpu1.xid_events, list) and gpu1.xid_events[0].meaning == "GPU has fallen off the bus"
    assert gpu1.xid_events[0].gpu_instance_id is None

    sample = _sample(side)
    alerts = {(a.gpu, a.kind): a for a in annotate(sample)}
    assert alerts[(1, "xid")].level == "critical" and "Xid 79" in alerts[(1, "xid")].message
    assert alerts[(0, "xid")].level == "careful" and "Xid 13" in alerts[(0, "xid")].message
    assert sample.alerts[0].startswith("critical xid GPU 1: Xid 79 GPU has fallen off the bus")

    registry = CollectorRegistry()
    exporter = SampleCollector()
    registry.register(exporter)
    exporter.update(sample)
    exporter.update(dataclasses.replace(sample))  # the same events seen again are counted again: a new sample
    text = generate_latest(registry).decode()
    assert 'gpuscope_alert{gpu="1",host=' in text and 'kind="xid",level="critical"' in text
    xid79 = [
        line for line in text.splitlines() if line.startswith("gpuscope_gpu_xid_events_total{") and 'xid="79"' in line
    ]
    assert len(xid79) == 1 and xid79[0].endswith(" 2.0") and 'gpu="1"' in xid79[0]

    import msgspec

    back = decode_record(msgspec.json.encode(record_to_dict(sample)))
    assert back.gpus[1].xid_events == gpu1.xid_events and back.alerts == sample.alerts


def test_xid_stays_recent_for_five_minutes_then_leaves_the_alert_line() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.inject_xid(0, 48)
        _tick(fake, collector)
        later = _tick(fake, collector, RECENT_S - 2)  # no new event, still recent
        assert later.gpus[0].xid_events == [] and _xids(later.gpus[0].xid_recent) == {48: 1}
        assert [a.kind for a in annotate(_sample(later)) if a.gpu == 0] == ["xid"]
        gone = _tick(fake, collector, 5.0)
        assert gone.gpus[0].xid_recent == []
        assert not [a for a in annotate(_sample(gone)) if a.kind == "xid"]


def test_registration_not_supported_is_unavailable_with_a_reason() -> None:
    fake = _fake(FakeGpu.h200(), FakeGpu.h200(errors={"nvmlDeviceRegisterEvents": "NotSupported"}))
    with opened_collector(fake) as collector:
        fake.inject_xid(1, 79)
        side = _tick(fake, collector)
    ok, refused = side.gpus
    assert ok.xid_events == []
    for name in ("xid_events", "xid_events_dropped", "xid_recent"):
        value = getattr(refused, name)
        assert reason_of(value) is Reason.NOT_SUPPORTED and "nvmlDeviceRegisterEvents" in value.detail
    registry = CollectorRegistry()
    exporter = SampleCollector()
    registry.register(exporter)
    exporter.update(_sample(side))
    text = generate_latest(registry).decode()
    assert 'metric="gpuscope_gpu_xid_events_total",nic="",reason="not_supported"' in text


def test_no_permission_and_mig_instances() -> None:
    fake = _fake(
        FakeGpu.h100(mig=["3g.40gb", "4g.40gb"]), FakeGpu.h200(errors={"nvmlDeviceRegisterEvents": "NoPermission"})
    )
    with opened_collector(fake) as collector:
        fake.inject_xid(0, 31, gpu_instance_id=1, compute_instance_id=0)
        side = _tick(fake, collector)
    full = [gpu for gpu in side.gpus if gpu.mig_parent_index is None]
    migs = [gpu for gpu in side.gpus if gpu.mig_parent_index is not None]
    assert isinstance(full[0].xid_events, list)
    assert [(e.xid, e.gpu_instance_id, e.compute_instance_id) for e in full[0].xid_events] == [(31, 1, 0)]
    assert reason_of(full[1].xid_events) is Reason.NO_PERMISSION
    assert migs and all(reason_of(gpu.xid_events) is Reason.NOT_APPLICABLE for gpu in migs)
    assert "MIG 1.0" in next(a.message for a in annotate(_sample(side)) if a.kind == "xid")


def test_event_set_is_freed_at_shutdown() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        assert len(fake.events.sets) == 1 and fake.events.freed == 0
    assert fake.events.created == 1 and fake.events.freed == 1 and not fake.events.sets


def test_a_flood_is_read_in_bounded_steps_and_extra_kinds_are_counted_as_dropped() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.inject_xid(0, 13, count=10 * MAX_READS_PER_SAMPLE)
        fake.reset_calls()
        first = _tick(fake, collector)
        assert fake.calls["nvmlEventSetWait_v2"] == MAX_READS_PER_SAMPLE  # not 10x: the rest waits
        assert _xids(first.gpus[0].xid_events) == {13: MAX_READS_PER_SAMPLE}
        second = _tick(fake, collector)
        assert _xids(second.gpus[0].xid_events) == {13: MAX_READS_PER_SAMPLE}
        assert _xids(second.gpus[0].xid_recent) == {13: 2 * MAX_READS_PER_SAMPLE}
        for _ in range(8):
            _tick(fake, collector)
        fake.reset_calls()
        assert _tick(fake, collector).gpus[0].xid_events == [] and fake.calls["nvmlEventSetWait_v2"] == 1

        for xid in range(200, 200 + MAX_ENTRIES_PER_GPU + 5):
            fake.inject_xid(1, xid, count=2)
        many = _tick(fake, collector).gpus[1]
    assert isinstance(many.xid_events, list) and len(many.xid_events) == MAX_ENTRIES_PER_GPU
    assert many.xid_events_dropped == 10
    assert all(event.meaning == "" for event in many.xid_events)


def test_a_failing_wait_makes_this_interval_unavailable_not_empty() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.inject("nvmlEventSetWait_v2", "Unknown")
        broken = _tick(fake, collector)
        assert reason_of(broken.gpus[0].xid_events) is Reason.ERROR
        assert broken.gpus[0].xid_recent == []
        assert _tick(fake, collector).gpus[0].xid_events == []


def test_lost_gpu_keeps_its_xid_79() -> None:
    fake = _fake()
    with opened_collector(fake) as collector:
        _tick(fake, collector)
        fake.inject_xid(1, 79)
        fake.lose_gpu(1)
        side = _tick(fake, collector)
    lost = side.gpus[1]
    assert lost.state == "lost" and _xids(lost.xid_events) == {79: 1}
    kinds = [(a.kind, a.level) for a in annotate(_sample(side)) if a.gpu == 1]
    assert ("xid", "critical") in kinds and ("gpu_lost", "critical") in kinds


def test_gpu_lost_at_open_is_registered_when_it_answers_again() -> None:
    fake = _fake()
    fake.lose_gpu(1)
    with opened_collector(fake) as collector:
        first = _tick(fake, collector)
        assert reason_of(first.gpus[1].xid_events) is Reason.GPU_LOST
        fake.restore_gpu(1)
        _tick(fake, collector, 31.0)  # the GPU is retried and opened again, then registered
        fake.inject_xid(1, 74)
        side = _tick(fake, collector, 31.0)
    assert _xids(side.gpus[1].xid_events) == {74: 1}


def test_mig_fake_rejects_event_registration_on_a_mig_handle() -> None:
    import pynvml

    fake = _fake(FakeGpu.h100(mig=["3g.40gb"]))
    with opened_collector(fake):
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
        event_set = pynvml.nvmlEventSetCreate()
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceRegisterEvents(mig, pynvml.nvmlEventTypeXidCriticalError, event_set)
        pynvml.nvmlEventSetFree(event_set)


def test_xid_event_is_a_small_typed_record() -> None:
    event = XidEvent(79, 1, 1.0, 1.0, "GPU has fallen off the bus")
    assert record_to_dict(event) == {
        "xid": 79, "count": 1, "first_time_s": 1.0, "last_time_s": 1.0,
        "meaning": "GPU has fallen off the bus", "gpu_instance_id": None, "compute_instance_id": None,
    }  # fmt: skip
