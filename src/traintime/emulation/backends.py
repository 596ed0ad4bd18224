"""Restriction backends: make a large host GPU behave like a smaller target GPU.

Every backend has ONE interface::

    with backend:                                  # session (e.g. MPS daemon up), optional
        with backend.apply(Setting(sm_pct=25, clock_mhz=1800)) as applied:
            ...                                    # measure; `applied` says what was really set

:class:`Applied` carries the effective setting read back (SM count, clock), the schema label of
the backend, and how the measurement must run (in this process, on a green-context stream, or in
a child process with an MPS environment).

Backends (label in the host-latency table in brackets):

- :class:`NoRestriction` [``none``]: the unrestricted host.
- :class:`MPSBackend` [``mps``]: starts ``nvidia-cuda-mps-control -d`` with private pipe/log
  folders; each SM percentage runs in its own child process whose environment sets
  ``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` before CUDA initialises; ``quit`` stops the daemon.
- :class:`NvmlClockBackend` [``nvml_clock``]: locks the graphics clock with NVML
  (``nvmlDeviceSetGpuLockedClocks``, needs root) to the supported clock nearest the request, at
  the highest memory clock, and resets it afterwards.
- :class:`GreenContextBackend` [``green_ctx``]: a CUDA green context with an SM partition
  (``torch.cuda.green_contexts.GreenContext``), work on its stream; no root needed.
- :class:`AnalyticClockBackend` [``analytic_clock``]: changes nothing; latency is multiplied by
  f_host / f_target afterwards. An approximation, NOT the paper's method, and labelled so.
- :class:`CombinedBackend`: an SM backend and a clock backend together (the paper's (p, f)).

Backends that change device state that outlives the process (NVML clock locks, the MPS daemon)
restore it in ``finally`` and also on SIGINT/SIGTERM (handlers restore, then behave as the
previous handler would; previous handlers are reinstated afterwards). Restoring is idempotent.

All external effects go through injectable seams (an NVML module object, a command runner, a
green-context factory), so tests drive every backend with fakes.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import FrameType, ModuleType
from typing import Any

from traintime.errors import ConfigError, DeviceStateError

log = logging.getLogger(__name__)

ANALYTIC_NOTE = ("analytic clock correction: latency x f_host/f_target; an approximation, "
                 "not the paper's locked-clock method")


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


# --- MPS ------------------------------------------------------------------------------------

#: runner(argv, env, stdin_text) -> None; raises subprocess.CalledProcessError / OSError on failure
CommandRunner = Callable[[Sequence[str], dict[str, str], "str | None"], None]


def run_command(argv: Sequence[str], env: dict[str, str], stdin: str | None = None) -> None:
    """Run a short control command (30 s limit); raise on a non-zero exit."""
    subprocess.run(list(argv), env=env, input=stdin, text=True, check=True, capture_output=True,
                   timeout=30)


class MPSBackend(Backend):
    """CUDA MPS thread-percentage restriction (no root needed with private pipe/log folders).

    The daemon runs for the session (``with backend:``) or, outside a session, for one
    :meth:`apply`. Measurements must run in a child process per percentage
    (``Applied.needs_subprocess``) whose environment is ``Applied.env``: the percentage only takes
    effect when set before CUDA initialises. The parent should not create a CUDA context itself.
    """

    label = "mps"
    dimension = "sm"
    CONTROL = "nvidia-cuda-mps-control"

    def __init__(self, runner: CommandRunner = run_command, control: str = CONTROL,
                 tmp_root: str | None = None, keep_logs: bool = False) -> None:
        self._runner = runner
        self._control = control
        self._tmp_root = tmp_root
        self._keep_logs = keep_logs
        self._dirs: dict[str, str] | None = None
        self._running = False
        self._session = 0
        self._guard: RestoreOnSignal | None = None

    @property
    def running(self) -> bool:
        return self._running

    def _env(self) -> dict[str, str]:
        assert self._dirs is not None
        return {"CUDA_MPS_PIPE_DIRECTORY": self._dirs["pipe"], "CUDA_MPS_LOG_DIRECTORY": self._dirs["log"]}

    def start(self) -> None:
        """Start the daemon with private, writable pipe/log folders (no-op if running)."""
        if self._running:
            return
        root = tempfile.mkdtemp(prefix="traintime-mps-", dir=self._tmp_root)
        self._dirs = {"root": root, "pipe": os.path.join(root, "pipe"), "log": os.path.join(root, "log")}
        os.makedirs(self._dirs["pipe"])
        os.makedirs(self._dirs["log"])
        env = {**os.environ, **self._env()}
        self._guard = RestoreOnSignal(self.stop)
        self._guard.__enter__()
        try:
            self._runner([self._control, "-d"], env, None)
        except FileNotFoundError:
            self._teardown()
            raise DeviceStateError(f"MPS: {self._control!r} not found (install the NVIDIA driver utilities "
                                   "or use backend green_ctx)") from None
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as exc:
            self._teardown()
            detail = getattr(exc, "stderr", None) or str(exc)
            raise DeviceStateError(f"MPS: could not start the daemon ({str(detail).strip()})") from None
        self._running = True
        log.info("MPS daemon started (pipe %s)", self._dirs["pipe"])

    def stop(self) -> None:
        """Stop the daemon (``echo quit | nvidia-cuda-mps-control``); idempotent."""
        if not self._running:
            self._teardown()
            return
        self._running = False  # first: a signal arriving during quit must not quit twice
        try:
            self._runner([self._control], {**os.environ, **self._env()}, "quit\n")
            log.info("MPS daemon stopped")
        except Exception as exc:
            log.error("MPS: 'quit' failed (%s); a daemon may be left behind in %s", exc,
                      self._dirs["pipe"] if self._dirs else "?")
        finally:
            self._teardown()

    def _teardown(self) -> None:
        if self._guard is not None:
            guard, self._guard = self._guard, None
            guard.__exit__(None, None, None)
        if self._dirs is not None and not self._keep_logs:
            shutil.rmtree(self._dirs["root"], ignore_errors=True)
            self._dirs = None

    def __enter__(self) -> MPSBackend:
        self._session += 1
        self.start()
        return self

    def close(self) -> None:
        self._session = max(0, self._session - 1)
        if self._session == 0:
            self.stop()

    @staticmethod
    def thread_percentage(sm_pct: float) -> int:
        """MPS takes an integer percentage in [1, 100]."""
        return int(min(100, max(1, math.floor(float(sm_pct) + 0.5))))

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if setting.sms is not None:
            raise ConfigError("backend 'mps' takes an SM percentage, not an SM count")
        own = not self._running
        if own:
            self.start()
        try:
            pct = self.thread_percentage(setting.sm_pct)
            env = {**self._env(), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(pct)}
            yield Applied(backend="mps", requested_sm_pct=round(float(setting.sm_pct), 4), env=env,
                          needs_subprocess=True, notes=[f"mps_thread_pct={pct}"])
        finally:
            if own:
                self.stop()


# --- NVML clock locking ---------------------------------------------------------------------


def _nvml_error_code(nvml: Any, exc: BaseException) -> int | None:
    return getattr(exc, "value", None) if isinstance(exc, nvml.NVMLError) else None


def nearest_clock(supported: Sequence[float], requested: float) -> float:
    """The supported clock nearest ``requested`` (ties: the lower clock)."""
    if not supported:
        raise DeviceStateError("NVML reported no supported graphics clocks")
    return float(min(sorted(supported), key=lambda f: (abs(float(f) - float(requested)), f)))


class NvmlClockBackend(Backend):
    """Lock the GPU's graphics clock through NVML (root only); reset it afterwards.

    The memory clock stays at its highest supported value; the graphics clock is the supported
    value nearest the request at that memory clock. ``NVML_ERROR_NO_PERMISSION`` becomes a
    :class:`~traintime.errors.DeviceStateError` saying root is needed. Locks outlive the process,
    so the reset runs in ``finally`` and on SIGINT/SIGTERM.
    """

    label = "nvml_clock"
    dimension = "clock"

    def __init__(self, nvml: ModuleType | Any | None = None, index: int = 0) -> None:
        self._nvml = nvml
        self._index = index
        self._handle: Any = None
        self._locked = False

    def _lib(self) -> Any:
        if self._nvml is None:
            try:
                import pynvml  # type: ignore[import-untyped]
            except ImportError:
                raise DeviceStateError("nvml_clock: the nvidia-ml-py package (pynvml) is not installed") from None
            self._nvml = pynvml
        return self._nvml

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        nvml = self._lib()
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            code = _nvml_error_code(nvml, exc)
            if code == getattr(nvml, "NVML_ERROR_NO_PERMISSION", 4):
                raise DeviceStateError(
                    f"nvml_clock: {what} was refused: locking GPU clocks needs root (NVML_ERROR_NO_PERMISSION); "
                    "run the sweep as root, or use clock backend 'analytic_clock' (an approximation)") from None
            if code == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", 3):
                raise DeviceStateError(f"nvml_clock: {what} is not supported on this GPU "
                                       "(NVML_ERROR_NOT_SUPPORTED); use clock backend 'analytic_clock'") from None
            raise DeviceStateError(f"nvml_clock: {what} failed: {exc}") from None

    def supported_clocks(self) -> tuple[float, list[float]]:
        """(highest memory clock, graphics clocks supported at it), MHz."""
        nvml = self._lib()
        self._ensure_handle()
        mems = self._call("nvmlDeviceGetSupportedMemoryClocks", nvml.nvmlDeviceGetSupportedMemoryClocks,
                          self._handle)
        if not mems:
            raise DeviceStateError("nvml_clock: NVML reported no supported memory clocks")
        mem = max(float(m) for m in mems)
        graphics = self._call("nvmlDeviceGetSupportedGraphicsClocks",
                              nvml.nvmlDeviceGetSupportedGraphicsClocks, self._handle, int(mem))
        return mem, sorted(float(g) for g in graphics)

    def _ensure_handle(self) -> None:
        if self._handle is None:
            nvml = self._lib()
            self._call("nvmlInit", nvml.nvmlInit)
            # by UUID when CUDA is up: NVML indices ignore CUDA_VISIBLE_DEVICES (SLURM)
            from traintime.device import nvml_handle

            self._handle = self._call("nvmlDeviceGetHandleByIndex", nvml_handle, nvml, self._index)

    def read_clock(self) -> float | None:
        """Current SM clock, MHz (None if NVML does not answer)."""
        nvml = self._lib()
        try:
            self._ensure_handle()
            return float(nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def reset(self) -> None:
        """Reset locked clocks if this backend locked them (idempotent)."""
        if not self._locked:
            return
        self._locked = False  # first: a signal during the reset must not reset twice
        nvml = self._lib()
        try:
            nvml.nvmlDeviceResetGpuLockedClocks(self._handle)
            log.info("GPU clocks reset")
        except Exception as exc:
            log.error("nvml_clock: resetting locked clocks failed (%s): run `nvidia-smi -rgc` as root", exc)

    def close(self) -> None:
        self.reset()

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if setting.clock_mhz is None:
            yield Applied(backend="none")
            return
        nvml = self._lib()
        mem, graphics = self.supported_clocks()
        target = nearest_clock(graphics, float(setting.clock_mhz))
        with RestoreOnSignal(self.reset):
            try:
                # flagged before the call: a signal arriving while NVML locks must still reset
                self._locked = True
                try:
                    self._call("nvmlDeviceSetGpuLockedClocks", nvml.nvmlDeviceSetGpuLockedClocks,
                               self._handle, int(target), int(target))
                except DeviceStateError:
                    self._locked = False
                    raise
                log.info("GPU clock locked at %.0f MHz (requested %.0f, memory %.0f)", target,
                         setting.clock_mhz, mem)
                yield Applied(backend="nvml_clock", requested_clock_mhz=float(setting.clock_mhz),
                              effective_clock_mhz=target, clock_reader=self.read_clock,
                              notes=[f"locked_clock_mhz={target:g}; memory_clock_mhz={mem:g}"])
            finally:
                self.reset()


# --- green contexts -------------------------------------------------------------------------


def green_ctx_granularity(compute_capability: str | tuple[int, int]) -> tuple[int, int]:
    """(minimum SMs, SM step) of a green-context partition: CC 8.x -> (4, 2); CC 9.0+ -> (8, 8)."""
    major = int(str(compute_capability).split(".")[0]) if not isinstance(compute_capability, tuple) \
        else int(compute_capability[0])
    if major < 8:
        raise DeviceStateError(f"green contexts need compute capability 8.0 or newer (device has "
                               f"{compute_capability})")
    return (4, 2) if major == 8 else (8, 8)


def round_green_sms(requested: float, total: int, compute_capability: str | tuple[int, int]) -> int:
    """Nearest SM count a green context can hold: a multiple of the step, at least the minimum, at
    most the largest multiple not above ``total``; ``total`` itself when ``requested >= total``."""
    if requested >= total:
        return int(total)
    lo, step = green_ctx_granularity(compute_capability)
    n = step * math.floor(float(requested) / step + 0.5)
    return int(min(max(lo, n), (int(total) // step) * step))


class GreenHandle:
    """What a green-context factory returns: ``stream()`` gives a new stream of the context,
    ``sm_count`` the SMs read back (None if unknown), ``readback`` how they were read."""

    def __init__(self, ctx: Any, stream: Callable[[], Any], sm_count: int | None, readback: str) -> None:
        self.ctx = ctx
        self.stream = stream
        self.sm_count = sm_count
        self.readback = readback

    def close(self) -> None:
        self.ctx = None


def _drv_call(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a cuda.bindings driver function; raise on an error code; return the result(s)."""
    from cuda.bindings import driver as drv  # type: ignore[import-not-found]

    out = fn(*args)
    err, rest = out[0], out[1:]
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{getattr(fn, '__name__', fn)} returned {err}")
    return rest[0] if len(rest) == 1 else rest


def read_back_green_sms(ctx: Any, requested: int, device_index: int) -> tuple[int | None, str]:
    """SMs of a green context: its partition (newer torch), the driver's view of the context, or
    the driver's split of the device for the same request (what torch asks for), in that order."""
    part = getattr(ctx, "sm_partition", None)
    if part is not None:
        try:
            return int(part.sm_count), "sm_partition"
        except Exception:
            pass
    try:
        from cuda.bindings import driver as drv  # type: ignore[import-not-found]
    except ImportError:
        return None, "not read back (no cuda.bindings)"
    sm_type = drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM
    raw = getattr(ctx, "_green_ctx", None)
    if raw is not None:
        try:
            res = _drv_call(drv.cuGreenCtxGetDevResource, raw, sm_type)
            return int(res.sm.smCount), "cuGreenCtxGetDevResource"
        except Exception:
            pass
    try:
        _drv_call(drv.cuInit, 0)
        dev = _drv_call(drv.cuDeviceGet, device_index)
        res = _drv_call(drv.cuDeviceGetDevResource, dev, sm_type)
        groups, nb, _rest = _drv_call(drv.cuDevSmResourceSplitByCount, 1, res, 0, int(requested))
        if nb >= 1:
            return int(groups[0].sm.smCount), "cuDevSmResourceSplitByCount"
    except Exception as exc:
        return None, f"not read back ({exc})"
    return None, "not read back"


def torch_green_context(num_sms: int, device_index: int = 0) -> GreenHandle:
    """Create a green context of ``num_sms`` SMs with this torch (``GreenContext.create``)."""
    import torch

    cls = getattr(torch.cuda, "GreenContext", None)
    if cls is None:
        cls = getattr(getattr(torch.cuda, "green_contexts", None), "GreenContext", None)
    if cls is None:
        raise DeviceStateError(f"green_ctx: torch {torch.__version__} has no torch.cuda GreenContext "
                               "(needs torch >= 2.9 with CUDA >= 12.8 and driver >= 12.8)")
    try:
        ctx = cls.create(num_sms=int(num_sms), device_id=device_index)
    except RuntimeError as exc:
        raise DeviceStateError(f"green_ctx: cannot create a green context of {num_sms} SMs: {exc}") from None
    if not hasattr(ctx, "Stream"):
        raise DeviceStateError(f"green_ctx: torch {torch.__version__}'s GreenContext has no Stream(); "
                               "work could not be bound to the partition (needs a newer torch)")

    def stream() -> Any:
        # some torch versions hand out one stream per context, others a new one per call, and some
        # a generic torch.Stream: always return a torch.cuda.Stream wrapping the green stream
        s = ctx.Stream()
        if isinstance(s, torch.cuda.Stream):
            return s
        return torch.cuda.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)

    count, how = read_back_green_sms(ctx, int(num_sms), device_index)
    return GreenHandle(ctx, stream, count, how)


def sm_resource_info(device_index: int = 0) -> dict[str, Any]:
    """The driver's SM resource of the device (read-only): SM count, minimum partition size and
    co-scheduling alignment (the green-context granularity), or an ``error`` entry."""
    try:
        from cuda.bindings import driver as drv  # type: ignore[import-not-found]

        _drv_call(drv.cuInit, 0)
        dev = _drv_call(drv.cuDeviceGet, device_index)
        res = _drv_call(drv.cuDeviceGetDevResource, dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM)
        out: dict[str, Any] = {"sm_count": int(res.sm.smCount)}
        for field_name in ("minSmPartitionSize", "smCoscheduledAlignment"):
            if hasattr(res.sm, field_name):
                out[field_name] = int(getattr(res.sm, field_name))
        return out
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


GreenFactory = Callable[[int, int], GreenHandle]


class GreenContextBackend(Backend):
    """SM partition through a CUDA green context (no root, no daemon, nothing outlives the process).

    The requested share (``Setting.sms``, else ``sm_pct`` of the host's SMs) is rounded to the
    partition granularity (:func:`round_green_sms`); the effective count is read back from the
    driver. All work of a measurement must run on streams from ``Applied.stream_factory``.
    A request for all SMs creates no context.
    """

    label = "green_ctx"
    dimension = "sm"

    def __init__(self, host_sms: int | None = None, compute_capability: str | None = None,
                 factory: GreenFactory = torch_green_context, device_index: int = 0) -> None:
        self._host_sms = host_sms
        self._cc = compute_capability
        self._factory = factory
        self._index = device_index

    def _device(self) -> tuple[int, str]:
        if self._host_sms is None or self._cc is None:
            from traintime.device import describe_device

            info = describe_device(self._index, nvml=False)
            if not info.is_cuda or info.sms is None:
                raise DeviceStateError("green_ctx: no CUDA device")
            self._host_sms, self._cc = info.sms, str(info.compute_capability)
        return int(self._host_sms), str(self._cc)

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        host_sms, cc = self._device()
        wanted = setting.sms if setting.sms is not None else float(setting.sm_pct) * host_sms / 100.0
        n = round_green_sms(wanted, host_sms, cc)
        pct = setting.requested_pct(host_sms)
        notes = [f"green_sms_requested={wanted:g}; partition_sms={n}"]
        if n >= host_sms:
            yield Applied(backend="green_ctx", requested_sm_pct=pct, effective_sms=host_sms,
                          notes=notes + ["all SMs: no partition"])
            return
        handle = self._factory(n, self._index)
        try:
            notes.append(f"sms_read_back_by={handle.readback}")
            yield Applied(backend="green_ctx", requested_sm_pct=pct, effective_sms=handle.sm_count,
                          stream_factory=handle.stream, notes=notes)
        finally:
            handle.close()


# --- analytic clock -------------------------------------------------------------------------


class AnalyticClockBackend(Backend):
    """No clock change: the latency is rescaled by ``host_clock_mhz / clock_mhz`` afterwards.

    ``host_clock_mhz``: the host's (boost) SM clock; when None it is read from NVML's maximum SM
    clock. Rows are labelled ``analytic_clock`` with a note that this is an approximation.
    """

    label = "analytic_clock"
    dimension = "clock"

    def __init__(self, host_clock_mhz: float | None = None, nvml: Any | None = None, index: int = 0) -> None:
        self._host_clock = host_clock_mhz
        self._nvml = nvml
        self._index = index

    def host_clock(self) -> float:
        if self._host_clock is None:
            from traintime.device import describe_device

            info = describe_device(self._index, nvml=self._nvml if self._nvml is not None else True,
                                   init_cuda=False)
            if not info.max_sm_clock_mhz:
                raise DeviceStateError("analytic_clock: the host's maximum SM clock could not be read; "
                                       "set emulation.host.host_clock_mhz")
            self._host_clock = float(info.max_sm_clock_mhz)
        return float(self._host_clock)

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if setting.clock_mhz is None:
            yield Applied(backend="none")
            return
        f_host = self.host_clock()
        scale = f_host / float(setting.clock_mhz)
        yield Applied(backend="analytic_clock", requested_clock_mhz=float(setting.clock_mhz),
                      effective_clock_mhz=f_host, latency_scale=scale,
                      notes=[ANALYTIC_NOTE, f"f_host_mhz={f_host:g}; scale={scale:.6g}"])


# --- combination ----------------------------------------------------------------------------


class CombinedBackend(Backend):
    """An SM backend and a clock backend applied together (the paper's (p, f) restriction).

    Label: ``analytic_clock`` whenever the clock is analytic (the row is an approximation; the
    note names the SM mechanism), else the SM backend's label when SMs are restricted, else the
    clock backend's label.
    """

    def __init__(self, sm: Backend, clock: Backend) -> None:
        self.sm = sm
        self.clock = clock
        self.label = clock.label if isinstance(clock, AnalyticClockBackend) else \
            (sm.label if not isinstance(sm, NoRestriction) else clock.label)

    def __enter__(self) -> CombinedBackend:
        self.sm.__enter__()
        try:
            self.clock.__enter__()
        except BaseException:
            self.sm.close()
            raise
        return self

    def close(self) -> None:
        try:
            self.clock.close()
        finally:
            self.sm.close()

    @property
    def needs_subprocess(self) -> bool:
        return isinstance(self.sm, MPSBackend)

    @contextmanager
    def apply(self, setting: Setting) -> Iterator[Applied]:
        if isinstance(self.sm, NoRestriction) and setting.restricts_sms:
            raise ConfigError(f"SM backend 'none' cannot restrict SMs (requested {setting.sm_pct}%)")
        if isinstance(self.clock, NoRestriction) and setting.clock_mhz is not None:
            raise ConfigError(f"clock backend 'none' cannot set a clock (requested {setting.clock_mhz} MHz)")
        sm_setting = replace(setting, clock_mhz=None)
        clock_setting = Setting(clock_mhz=setting.clock_mhz)
        with self.clock.apply(clock_setting) as ca, self.sm.apply(sm_setting) as sa:
            if ca.backend == "analytic_clock":
                label = "analytic_clock"
                sm_note = f"sm_backend={sa.backend}"
            elif sa.backend != "none":
                label, sm_note = sa.backend, ""
            else:
                label, sm_note = ca.backend, ""
            yield Applied(
                backend=label,
                requested_sm_pct=sa.requested_sm_pct,
                requested_clock_mhz=ca.requested_clock_mhz,
                effective_sms=sa.effective_sms,
                effective_clock_mhz=ca.effective_clock_mhz,
                env=dict(sa.env),
                needs_subprocess=sa.needs_subprocess,
                stream_factory=sa.stream_factory,
                latency_scale=ca.latency_scale,
                clock_reader=ca.clock_reader,
                notes=[n for n in (sm_note, *sa.notes, *ca.notes) if n],
            )


SM_BACKENDS = ("none", "mps", "green_ctx")
CLOCK_BACKENDS = ("none", "nvml_clock", "analytic_clock")


def make_backend(sm: str = "none", clock: str = "none", *, host_clock_mhz: float | None = None,
                 nvml: Any | None = None, runner: CommandRunner = run_command,
                 green_factory: GreenFactory = torch_green_context, device_index: int = 0) -> CombinedBackend:
    """Build the (SM, clock) backend pair named in the config (seams passed through for tests)."""
    if sm not in SM_BACKENDS:
        raise ConfigError(f"emulation.host.backend: {sm!r} is not one of {', '.join(SM_BACKENDS)}")
    if clock not in CLOCK_BACKENDS:
        raise ConfigError(f"emulation.host.clock_backend: {clock!r} is not one of {', '.join(CLOCK_BACKENDS)}")
    sm_b: Backend = {"none": lambda: NoRestriction("sm"), "mps": lambda: MPSBackend(runner=runner),
                     "green_ctx": lambda: GreenContextBackend(factory=green_factory,
                                                             device_index=device_index)}[sm]()
    clock_b: Backend = {"none": lambda: NoRestriction("clock"),
                        "nvml_clock": lambda: NvmlClockBackend(nvml=nvml, index=device_index),
                        "analytic_clock": lambda: AnalyticClockBackend(host_clock_mhz, nvml=nvml,
                                                                       index=device_index)}[clock]()
    return CombinedBackend(sm_b, clock_b)
