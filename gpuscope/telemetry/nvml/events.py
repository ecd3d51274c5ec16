"""Xid errors through one NVML event set: registered at open, drained once per sample.

Cost: at open, per GPU one ``nvmlDeviceGetSupportedEventTypes`` and one
``nvmlDeviceRegisterEvents``; per sample one ``nvmlEventSetWait_v2`` with a 0 ms timeout, which
answers Timeout when no Xid happened (no per-GPU call). When events arrive, at most
:data:`MAX_READS_PER_SAMPLE` are read in one sample; the rest wait in NVML's queue for the next
samples, so a flood delays events but never stalls a sample. Per GPU and sample at most
:data:`MAX_ENTRIES_PER_GPU` distinct (Xid, MIG instance) entries are kept; events beyond them are
counted in ``xid_events_dropped``. NVML only reports Xids that happen after registration.

A GPU whose registration fails (NotSupported on some boards and MIG setups, NoPermission) has its
Xid fields ``Unavailable`` with the reason, never an empty list; a transient failure (GPU lost,
unknown error) is retried every :data:`RETRY_S`. A lost GPU's Xid fields say ``gpu_lost`` like its
other metrics, except for the Xids it did report (79, fallen off the bus, comes with the loss).
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuscope.telemetry.nvml.session import GpuLostError, call, pynvml, unavailable_from_error
from gpuscope.telemetry.records import GpuSample, XidEvent
from gpuscope.telemetry.values import Reason, Unavailable
from gpuscope.telemetry.xid import xid_meaning

__all__ = ["XidReader", "MAX_READS_PER_SAMPLE", "MAX_ENTRIES_PER_GPU", "RECENT_S", "RETRY_S"]

#: Events read per sample at most (a flood waits in NVML's queue for the next samples).
MAX_READS_PER_SAMPLE = 256
#: Distinct (Xid, MIG instance) entries kept per GPU and sample; further events are counted as dropped.
MAX_ENTRIES_PER_GPU = 16
#: How long an Xid stays in ``xid_recent`` (and so on the alert line) after it was last seen, seconds.
RECENT_S = 300.0
#: How often a registration that failed transiently is tried again, seconds.
RETRY_S = 30.0
#: NVML's "no MIG instance" id in c_nvmlEventData_t.
_NO_INSTANCE = 0xFFFFFFFF

_Key = tuple[int, int | None, int | None]


class GpuHandle(Protocol):
    """What the reader needs of the collector's per-GPU state."""

    index: int
    handle: Any
    lost: bool


@dataclass
class _Gpu:
    status: Unavailable | None = None  # None: registered
    retry_at_s: float | None = None  # a transient failure: register again at this clock time
    interval: dict[_Key, XidEvent] = field(default_factory=dict)
    dropped: int = 0
    recent: dict[_Key, tuple[float, XidEvent]] = field(default_factory=dict)  # key -> (clock s, merged)


def _address(handle: Any) -> int:
    return ctypes.cast(handle, ctypes.c_void_p).value or 0


def _instance(value: int) -> int | None:
    return None if value == _NO_INSTANCE else int(value)


class XidReader:
    """The collector's event set. ``open``/``fill``/``close`` never raise.

    ``clock`` (monotonic seconds) ages ``xid_recent`` and paces retries; ``wall_clock`` stamps the
    events (seconds since the epoch)."""

    def __init__(self, clock: Callable[[], float], wall_clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._wall_clock = wall_clock
        self._set: Any = None
        self._set_problem: Unavailable | None = Unavailable(Reason.ERROR, "the NVML event set is not open")
        self._gpus: dict[int, _Gpu] = {}
        self._by_address: dict[int, int] = {}
        self._read_problem: Unavailable | None = None
        self._retrying = False

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self, gpus: Sequence[GpuHandle]) -> None:
        """Create the event set and register each GPU that has a handle for Xid events."""
        self.close()
        created = call("nvmlEventSetCreate", pynvml.nvmlEventSetCreate)
        if isinstance(created, Unavailable):
            self._set_problem = created
        else:
            self._set, self._set_problem = created, None
        for gpu in gpus:
            self._gpus[gpu.index] = state = _Gpu()
            self._register(gpu, state)

    def _register(self, gpu: GpuHandle, state: _Gpu) -> None:
        state.retry_at_s = None
        if self._set_problem is not None:
            state.status = self._set_problem
            return
        if gpu.handle is None or gpu.lost:
            state.status = Unavailable(Reason.GPU_LOST if gpu.lost else Reason.ERROR, "GPU not open for Xid events")
            state.retry_at_s = self._clock() + RETRY_S
            self._retrying = True
            return
        wanted = pynvml.nvmlEventTypeXidCriticalError
        try:
            supported = call("nvmlDeviceGetSupportedEventTypes", pynvml.nvmlDeviceGetSupportedEventTypes, gpu.handle)
            if isinstance(supported, Unavailable):
                status: Unavailable | None = supported
            elif not int(supported) & wanted:
                status = Unavailable(Reason.NOT_SUPPORTED, "this GPU does not report Xid events")
            else:
                done = call("nvmlDeviceRegisterEvents", pynvml.nvmlDeviceRegisterEvents, gpu.handle, wanted, self._set)
                status = done if isinstance(done, Unavailable) else None
        except GpuLostError as exc:
            status = Unavailable(Reason.GPU_LOST, str(exc))
        state.status = status
        if status is None:
            self._by_address[_address(gpu.handle)] = gpu.index
        elif status.reason in (Reason.GPU_LOST, Reason.ERROR):
            state.retry_at_s = self._clock() + RETRY_S
            self._retrying = True

    def close(self) -> None:
        """Free the event set (``open`` may be called again)."""
        if self._set is not None:
            try:
                pynvml.nvmlEventSetFree(self._set)
            except Exception:  # noqa: BLE001 - shutting down
                pass
        self._set = None
        self._set_problem = Unavailable(Reason.ERROR, "the NVML event set is not open")
        self._gpus = {}
        self._by_address = {}
        self._retrying = False

    # --- sampling --------------------------------------------------------------------------------

    def fill(self, samples: list[GpuSample], gpus: Sequence[GpuHandle]) -> None:
        """Read the events NVML holds, then set the Xid fields of each full-GPU sample."""
        if self._retrying:
            self._retry(gpus)
        if self._by_address:
            self._drain()
        now = self._clock()
        quiet = self._read_problem is None
        for sample in samples:
            state = self._gpus.get(sample.index)
            if sample.mig_parent_index is not None or state is None:
                continue
            if quiet and state.status is None and not (state.interval or state.recent or state.dropped):
                if sample.state == "ok":  # the usual case: registered, nothing happened
                    sample.xid_events, sample.xid_events_dropped, sample.xid_recent = [], 0, []
                continue
            if state.status is not None:
                sample.xid_events = sample.xid_events_dropped = sample.xid_recent = state.status
                continue
            if state.recent:
                self._age(state, now)
            if sample.state != "ok":  # lost: every metric says gpu_lost, except the Xids it reported (79)
                if state.recent:
                    sample.xid_recent = [merged for _, merged in state.recent.values()]
                if state.interval or state.dropped:
                    sample.xid_events, sample.xid_events_dropped = list(state.interval.values()), state.dropped
                    state.interval, state.dropped = {}, 0
                continue
            sample.xid_recent = [merged for _, merged in state.recent.values()]
            if self._read_problem is not None:
                sample.xid_events = sample.xid_events_dropped = self._read_problem
                continue
            sample.xid_events = list(state.interval.values())
            sample.xid_events_dropped = state.dropped
            if state.interval or state.dropped:
                state.interval = {}
                state.dropped = 0

    def _retry(self, gpus: Sequence[GpuHandle]) -> None:
        now = self._clock()
        self._retrying = False
        for gpu in gpus:
            state = self._gpus.get(gpu.index)
            if state is None or state.retry_at_s is None:
                continue
            if now >= state.retry_at_s:
                self._register(gpu, state)
            self._retrying = self._retrying or state.retry_at_s is not None

    def _drain(self) -> None:
        """Up to MAX_READS_PER_SAMPLE events; stops at the first Timeout (the quiet case: one call)."""
        self._read_problem = None
        timeout = pynvml.NVML_ERROR_TIMEOUT
        xid_type = pynvml.nvmlEventTypeXidCriticalError
        for _ in range(MAX_READS_PER_SAMPLE):
            try:
                data = pynvml.nvmlEventSetWait_v2(self._set, 0)
            except pynvml.NVMLError as exc:
                if exc.value != timeout:
                    self._read_problem = unavailable_from_error(exc, "nvmlEventSetWait_v2")
                return
            except Exception as exc:  # noqa: BLE001 - never raise
                self._read_problem = unavailable_from_error(exc, "nvmlEventSetWait_v2")
                return
            index = self._by_address.get(_address(data.device))
            if index is None or not data.eventType & xid_type:
                continue
            self._record(self._gpus[index], int(data.eventData), data.gpuInstanceId, data.computeInstanceId)

    def _record(self, state: _Gpu, xid: int, gi: int, ci: int) -> None:
        key = (xid, _instance(gi), _instance(ci))
        wall = self._wall_clock()
        entry = state.interval.get(key)
        if entry is not None:
            entry.count += 1
            entry.last_time_s = wall
        elif len(state.interval) < MAX_ENTRIES_PER_GPU:
            state.interval[key] = XidEvent(xid, 1, wall, wall, xid_meaning(xid), key[1], key[2])
        else:
            state.dropped += 1
        seen = state.recent.get(key)
        if seen is None:
            merged = XidEvent(xid, 1, wall, wall, xid_meaning(xid), key[1], key[2])
        else:
            merged = seen[1]
            merged = XidEvent(xid, merged.count + 1, merged.first_time_s, wall, merged.meaning, key[1], key[2])
        state.recent[key] = (self._clock(), merged)

    @staticmethod
    def _age(state: _Gpu, now: float) -> None:
        for key in [key for key, (seen_s, _) in state.recent.items() if now - seen_s > RECENT_S]:
            del state.recent[key]

    # --- introspection ---------------------------------------------------------------------------

    def status(self, index: int) -> Unavailable | None:
        """Why GPU ``index`` reports no Xid events (None: it is registered)."""
        state = self._gpus.get(index)
        return self._set_problem if state is None else state.status
