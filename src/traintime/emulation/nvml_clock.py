"""NVML locked-clock backend (root): lock the graphics clock to a supported value, always reset it."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from traintime.core.errors import DeviceStateError

log = logging.getLogger(__name__)
from traintime.emulation.restriction import Applied, Backend, RestoreOnSignal, Setting

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
    :class:`~traintime.core.errors.DeviceStateError` saying root is needed. Locks outlive the process,
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
            from traintime.measure.device import nvml_handle

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
