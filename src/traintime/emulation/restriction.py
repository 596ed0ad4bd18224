"""The restriction backend interface: settings, what was applied (read back), signal-safe restore, the no-op backend."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from traintime.core.errors import ConfigError, DeviceStateError

log = logging.getLogger(__name__)


# --- settings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """A requested restriction. ``sm_pct``: share of the host's SMs in percent (MPS thread
    percentage); ``sms``: an explicit SM count (green contexts), which overrides ``sm_pct`` when
    given; ``clock_mhz``: the graphics clock to lock, or None for no clock restriction."""

    sm_pct: float = 100.0
    clock_mhz: float | None = None
    sms: int | None = None

    def __post_init__(self) -> None:
        if not 0 < float(self.sm_pct) <= 100:
            raise ConfigError(f"SM share must be in (0, 100] percent, got {self.sm_pct}")
        if self.clock_mhz is not None and float(self.clock_mhz) <= 0:
            raise ConfigError(f"clock must be positive MHz, got {self.clock_mhz}")
        if self.sms is not None and int(self.sms) < 1:
            raise ConfigError(f"SM count must be positive, got {self.sms}")

    @property
    def restricts_sms(self) -> bool:
        return self.sms is not None or float(self.sm_pct) < 100

    def requested_pct(self, host_sms: int | None) -> float:
        """The requested SM share in percent (from ``sms`` when given), rounded to 1e-4."""
        if self.sms is not None:
            if not host_sms:
                raise DeviceStateError("an SM count was requested but the host's SM count is unknown")
            return round(min(100.0, 100.0 * int(self.sms) / int(host_sms)), 4)
        return round(float(self.sm_pct), 4)


@dataclass
class Applied:
    """What a backend really set, and how the measurement must run.

    ``effective_sms`` / ``effective_clock_mhz``: read back (None = read back by the measuring
    process). ``env``: variables a child process must get; ``needs_subprocess``: measure in a
    fresh child (MPS). ``stream_factory``: returns a new stream all work must run on (green
    context). ``latency_scale``: multiply measured latency by this (analytic clock).
    ``clock_reader``: returns the current SM clock (MHz) during the run, or None.
    """

    backend: str
    requested_sm_pct: float = 100.0
    requested_clock_mhz: float | None = None
    effective_sms: int | None = None
    effective_clock_mhz: float | None = None
    env: dict[str, str] = field(default_factory=dict)
    needs_subprocess: bool = False
    stream_factory: Callable[[], Any] | None = None
    latency_scale: float = 1.0
    clock_reader: Callable[[], float | None] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def note(self) -> str:
        return "; ".join(n for n in self.notes if n)


# --- signal safety --------------------------------------------------------------------------


class RestoreOnSignal:
    """While active, SIGINT/SIGTERM first call ``restore`` and then act as the previous handler.

    A previous handler that is a function is called; the default action becomes
    ``KeyboardInterrupt`` (SIGINT) or ``SystemExit(128 + signum)`` (SIGTERM), so ``finally``
    blocks still run; an ignored signal stays ignored (and nothing is restored). Handlers can only
    be installed from the main thread; elsewhere this is a no-op with a warning. The previous
    handlers are reinstated on exit.
    """

    def __init__(self, restore: Callable[[], None],
                 signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self._restore = restore
        self._signals = tuple(signals)
        self._previous: dict[int, Any] = {}

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        prev = self._previous.get(signum, signal.SIG_DFL)
        if prev is signal.SIG_IGN:
            return
        try:
            self._restore()
        except Exception:  # pragma: no cover - restoring must never mask the signal
            log.exception("restoring the device after signal %d failed", signum)
        if callable(prev):
            prev(signum, frame)
            return
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def __enter__(self) -> RestoreOnSignal:
        if threading.current_thread() is not threading.main_thread():
            log.warning("not in the main thread: device state is restored on exit only, not on signals")
            return self
        for sig in self._signals:
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, prev in self._previous.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        self._previous.clear()


# --- base -----------------------------------------------------------------------------------


class Backend:
    """Base class. ``label`` is the value of the ``backend`` column in host-latency rows."""

    label = "none"
    #: the backend restricts SMs (sm) or the clock (clock)
    dimension = "sm"

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End a session and restore anything still changed (idempotent)."""

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:  # pragma: no cover - abstract
        raise NotImplementedError
        yield


class NoRestriction(Backend):
    """The unrestricted host: checks that nothing was requested, changes nothing."""

    label = "none"

    def __init__(self, dimension: str = "both") -> None:
        self.dimension = dimension

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if self.dimension in ("both", "sm") and setting.restricts_sms:
            raise ConfigError(f"backend 'none' cannot restrict SMs (requested {setting.sm_pct}% / "
                              f"{setting.sms} SMs): choose mps or green_ctx")
        if self.dimension in ("both", "clock") and setting.clock_mhz is not None:
            raise ConfigError(f"backend 'none' cannot set a clock (requested {setting.clock_mhz} MHz): "
                              "choose nvml_clock or analytic_clock")
        yield Applied(backend="none", requested_sm_pct=100.0)
