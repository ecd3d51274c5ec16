"""Event-set symbols of :class:`gpuscope.testing.fake_nvml.FakeNvml`: Xid errors on demand.

``nvmlEventSetCreate`` / ``nvmlDeviceGetSupportedEventTypes`` / ``nvmlDeviceRegisterEvents`` /
``nvmlEventSetWait_v2`` / ``nvmlEventSetFree``, with the arguments the real pynvml wrappers pass.
Tests inject events with :meth:`EventSymbols.inject_xid` (now or at a clock time, one or a flood);
an event reaches every event set on which its GPU was registered for Xid events before it
happened, as in the driver. A registration error is a ``FakeGpu.errors`` entry, e.g.
``FakeGpu.h100(errors={"nvmlDeviceRegisterEvents": "NotSupported"})``; MIG device handles
answer NotSupported. Event sets live at ``0x7E000000 + 16 n``.
"""

from __future__ import annotations

import ctypes
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pynvml

from gpuscope.testing._fake_nvml_symbols import FakeReturn, Handle, Ref, as_int, handle_address, write_pointer

if TYPE_CHECKING:  # pragma: no cover
    import threading

    from gpuscope.testing._fake_nvml_model import FakeGpu, FakeMig

__all__ = ["EventSymbols", "EventState", "FakeXid", "SUPPORTED_EVENT_TYPES"]

_OK = pynvml.NVML_SUCCESS
_TIMEOUT: int = pynvml.NVML_ERROR_TIMEOUT
_NOT_SUPPORTED: int = pynvml.NVML_ERROR_NOT_SUPPORTED
_INVALID: int = pynvml.NVML_ERROR_INVALID_ARGUMENT
_XID = pynvml.nvmlEventTypeXidCriticalError
_SET_BASE = 0x7E000000
_NO_INSTANCE = 0xFFFFFFFF
#: What every fake GPU says it can report (a data-center board's set).
SUPPORTED_EVENT_TYPES = (
    pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | _XID
    | pynvml.nvmlEventTypeClock
)
_DEVICE_OFFSET = pynvml.c_nvmlEventData_t.device.offset


@dataclass
class FakeXid:
    """``count`` Xid ``xid`` events on GPU ``gpu`` at clock time ``at_s`` (MIG ids optional)."""

    gpu: int
    xid: int
    at_s: float
    count: int = 1
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass
class _Queued:
    event: FakeXid
    remaining: int  # times it is still to be reported


@dataclass
class _EventSet:
    registered: dict[int, tuple[int, float]] = field(default_factory=dict)  # GPU -> (mask, registered at)
    queue: deque[_Queued] = field(default_factory=deque)


class EventState:
    """The event sets (``sets``: open ones, ``created``, ``freed``) and the injected events."""

    def __init__(self) -> None:
        self.sets: dict[int, _EventSet] = {}
        self.created = 0
        self.freed = 0
        self.pending: list[FakeXid] = []


class EventSymbols:
    """NVML event symbols (mixed into FakeNvml)."""

    # set by FakeNvml.__init__
    gpus: list[FakeGpu]
    _lock: threading.RLock
    events: EventState

    if TYPE_CHECKING:  # defined by FakeNvml and SymbolsMixin

        def now(self) -> float: ...

        def _target(self, handle: Handle) -> tuple[int, FakeGpu, FakeMig | None]: ...

    def inject_xid(
        self,
        gpu: int,
        xid: int,
        *,
        count: int = 1,
        at_time_s: float | None = None,
        gpu_instance_id: int | None = None,
        compute_instance_id: int | None = None,
    ) -> None:
        """Xid ``xid`` happens ``count`` times on GPU ``gpu``, now or when the clock reaches ``at_time_s``."""
        with self._lock:
            when = self.now() if at_time_s is None else at_time_s
            self.events.pending.append(FakeXid(gpu, xid, when, count, gpu_instance_id, compute_instance_id))

    def _event_set(self, handle: Handle) -> _EventSet:
        found = self.events.sets.get(handle_address(handle))
        if found is None:
            raise FakeReturn(_INVALID)
        return found

    def _deliver(self) -> None:
        """Move the injected events that happened by now into the sets registered for them."""
        state = self.events
        if not state.pending:
            return
        now = self.now()
        due = [event for event in state.pending if event.at_s <= now]
        if not due:
            return
        state.pending = [event for event in state.pending if event.at_s > now]
        for event in sorted(due, key=lambda e: e.at_s):
            for event_set in state.sets.values():
                mask, since = event_set.registered.get(event.gpu, (0, 0.0))
                if mask & _XID and since <= event.at_s:
                    event_set.queue.append(_Queued(event, event.count))

    def _sym_nvmlEventSetCreate(self, ref: Ref[Handle]) -> int:
        state = self.events
        address = _SET_BASE + 16 * state.created
        state.created += 1
        state.sets[address] = _EventSet()
        write_pointer(ref, address)
        return _OK

    def _sym_nvmlDeviceGetSupportedEventTypes(self, handle: Handle, ref: Ref[ctypes.c_ulonglong]) -> int:
        self._target(handle)
        ref._obj.value = SUPPORTED_EVENT_TYPES
        return _OK

    def _sym_nvmlDeviceRegisterEvents(self, handle: Handle, types: ctypes.c_ulonglong, event_set: Handle) -> int:
        index, _, mig = self._target(handle)
        if mig is not None:
            return _NOT_SUPPORTED
        mask = as_int(types)
        if mask & ~SUPPORTED_EVENT_TYPES:
            return _NOT_SUPPORTED
        found = self._event_set(event_set)
        old, since = found.registered.get(index, (0, self.now()))
        found.registered[index] = (old | mask, since)
        return _OK

    def _sym_nvmlEventSetWait_v2(
        self, event_set: Handle, data_ref: Ref[pynvml.c_nvmlEventData_t], timeout_ms: ctypes.c_uint
    ) -> int:
        found = self._event_set(event_set)
        self._deliver()
        if not found.queue:
            return _TIMEOUT
        item = found.queue[0]
        event = item.event
        item.remaining -= 1
        if item.remaining <= 0:
            found.queue.popleft()
        data = data_ref._obj
        ctypes.c_void_p.from_buffer(data, _DEVICE_OFFSET).value = (event.gpu + 1) << 16
        data.eventType = _XID
        data.eventData = event.xid
        data.gpuInstanceId = _NO_INSTANCE if event.gpu_instance_id is None else event.gpu_instance_id
        data.computeInstanceId = _NO_INSTANCE if event.compute_instance_id is None else event.compute_instance_id
        return _OK

    def _sym_nvmlEventSetFree(self, event_set: Handle) -> int:
        state = self.events
        if state.sets.pop(handle_address(event_set), None) is None:
            return _INVALID
        state.freed += 1
        return _OK
