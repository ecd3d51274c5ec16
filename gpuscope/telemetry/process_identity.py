"""A GPU process's name and user through psutil, cached per process start: one reader for every vendor.

Inside a container a GPU library reports host PIDs the container cannot see: their name and user are
unavailable ("process in another PID namespace"), nothing crashes."""

from __future__ import annotations

from gpuscope.telemetry.values import Metric, Reason, Unavailable

try:
    import psutil
except ImportError:  # pragma: no cover - psutil is a dependency
    psutil = None  # type: ignore[assignment]

__all__ = ["process_identity"]

_OTHER_NAMESPACE = Unavailable(Reason.NOT_APPLICABLE, "process in another PID namespace")

_identity_cache: dict[int, tuple[float, Metric[str], Metric[str]]] = {}


def process_identity(pid: int) -> tuple[Metric[str], Metric[str]]:
    """(name, user) of ``pid`` through psutil, cached per process start time."""
    if psutil is None:
        missing = Unavailable(Reason.NOT_SUPPORTED, "psutil is not installed")
        return missing, missing
    try:
        process = psutil.Process(pid)
        started = process.create_time()
    except psutil.NoSuchProcess:
        return _OTHER_NAMESPACE, _OTHER_NAMESPACE
    except psutil.AccessDenied:
        denied = Unavailable(Reason.NO_PERMISSION, "cannot read this process")
        return denied, denied
    except Exception as exc:  # noqa: BLE001
        failed = Unavailable(Reason.ERROR, f"psutil: {exc}")
        return failed, failed
    cached = _identity_cache.get(pid)
    if cached is not None and cached[0] == started:
        return cached[1], cached[2]
    name: Metric[str]
    user: Metric[str]
    try:
        name = process.name()
    except Exception as exc:  # noqa: BLE001
        name = Unavailable(
            Reason.NO_PERMISSION if isinstance(exc, psutil.AccessDenied) else Reason.ERROR, str(exc) or "name"
        )
    try:
        user = process.username()
    except Exception as exc:  # noqa: BLE001 - e.g. a uid with no passwd entry
        user = Unavailable(
            Reason.NO_PERMISSION if isinstance(exc, psutil.AccessDenied) else Reason.ERROR, str(exc) or "user"
        )
    if len(_identity_cache) > 4096:
        _identity_cache.clear()
    _identity_cache[pid] = (started, name, user)
    return name, user
