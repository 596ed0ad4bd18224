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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from traintime.core.errors import ConfigError, DeviceStateError
from traintime.emulation.green_ctx import (
    GreenContextBackend,
    GreenFactory,
    torch_green_context,
)
from traintime.emulation.mps import CommandRunner, MPSBackend, run_command
from traintime.emulation.nvml_clock import NvmlClockBackend
from traintime.emulation.restriction import Applied, Backend, NoRestriction, Setting

log = logging.getLogger(__name__)

ANALYTIC_NOTE = ("analytic clock correction: latency x f_host/f_target; an approximation, "
                 "not the paper's locked-clock method")


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
            from traintime.measure.device import describe_device

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
