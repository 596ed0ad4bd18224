"""Host emulation on any host: which GPU the host is, and which restriction backends it can use.

- :func:`detect_host_gpu`: ``emulation.host.host_gpu: null`` (the default) takes the host GPU from the
  device, read-only: NVML's device name (no CUDA context is created, no state changes), else
  ``torch.cuda.get_device_name``; the name is resolved through the GPU spec table.
- :func:`resolve_backends`: ``backend: auto`` / ``clock_backend: auto`` (the defaults) pick the
  backends that need no root: CUDA green contexts for the SM share, the analytic clock correction
  (read-only NVML clock; labelled an approximation) for the clock. The root backends (``mps``: the
  MPS control daemon; ``nvml_clock``: locked clocks) are opt-in, and asking for one without root
  stops with one line that says so and names the alternative.
- :func:`resolve_mapping_backend`: ``emulation.mapping_backend: auto`` is the SM backend the host
  rows are measured with (green contexts unless ``mps`` is chosen).

Every effect goes through an injectable seam (NVML module, CUDA name reader, uid), so tests use fakes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pandas as pd

from traintime.core.errors import ConfigError, UnknownNameError

__all__ = ["ROOT_BACKENDS", "detect_host_gpu", "device_name", "is_root", "resolve_backends", "resolved_host_config",
           "resolve_mapping_backend"]

#: Backends that change device state only root may change (opt-in; refused without root).
ROOT_BACKENDS = {"mps": "it starts the MPS control daemon and sets the GPU's compute mode",
                 "nvml_clock": "it locks the GPU's clocks (nvmlDeviceSetGpuLockedClocks)"}
_ALTERNATIVE = {"mps": "backend: green_ctx (CUDA green contexts, no root) or auto",
                "nvml_clock": "clock_backend: analytic_clock (an approximation, labelled so) or auto"}


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _nvml_name(nvml: Any, index: int) -> str | None:
    try:
        nvml.nvmlInit()
        try:
            name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(index))
        finally:
            nvml.nvmlShutdown()
    except Exception:  # no driver, no device, no library: not an error here (the caller reports)
        return None
    return name.decode() if isinstance(name, bytes) else str(name)


def _torch_name(index: int) -> str | None:
    try:
        import torch

        return torch.cuda.get_device_name(index) if torch.cuda.is_available() else None
    except Exception:  # pragma: no cover - a broken CUDA install reads as "no device"
        return None


def device_name(index: int = 0, nvml: Any | None | bool = True,
                cuda_name: Callable[[int], str | None] = _torch_name) -> str | None:
    """Name of GPU ``index``, read-only: NVML first (no CUDA context), else torch; None without a GPU."""
    if nvml is True:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            nvml = None
    name = _nvml_name(nvml, index) if nvml else None
    return name or cuda_name(index)


def detect_host_gpu(configured: str | None, specs: pd.DataFrame, *, index: int = 0, nvml: Any | None | bool = True,
                    cuda_name: Callable[[int], str | None] = _torch_name) -> str:
    """Canonical spec-table name of the host GPU: ``configured`` when given, else the device's name.

    Raises :class:`ConfigError` (one line) when no GPU is visible or its name is not in the table."""
    from traintime.core.specs import canonical_gpu

    if configured:
        return canonical_gpu(configured, specs)
    name = device_name(index, nvml=nvml, cuda_name=cuda_name)
    if not name:
        raise ConfigError("config: emulation.host.host_gpu is null (take the host GPU from the device), but no "
                          "GPU is visible here; set emulation.host.host_gpu to the GPU the jobs run on (e.g. when "
                          "Snakemake runs on a SLURM login node)")
    try:
        return canonical_gpu(name, specs)
    except UnknownNameError:
        raise ConfigError(f"config: emulation.host.host_gpu is null and the device {name!r} is not in the GPU "
                          "spec table; add its row to a table given as gpu_specs (see `traintime gpus --specs`) "
                          "and set emulation.host.host_gpu to its name") from None


def resolve_backends(backend: str, clock_backend: str, *, root: bool | None = None) -> tuple[str, str]:
    """(SM backend, clock backend) to use: ``auto`` -> ``green_ctx`` / ``analytic_clock`` (no root);
    ``mps`` / ``nvml_clock`` without root -> one-line :class:`ConfigError` naming the alternative."""
    root = is_root() if root is None else root
    sm = "green_ctx" if backend == "auto" else backend
    clock = "analytic_clock" if clock_backend == "auto" else clock_backend
    for key, name in (("backend", sm), ("clock_backend", clock)):
        if name in ROOT_BACKENDS and not root:
            raise ConfigError(f"config: emulation.host.{key}: {name} needs root ({ROOT_BACKENDS[name]}) and this "
                              f"process is not root; run as root or use {_ALTERNATIVE[name]}")
    return sm, clock


def resolve_mapping_backend(mapping_backend: str, host_backend: str) -> str:
    """``emulation.mapping_backend``: ``auto`` -> the host's SM backend (``mps`` when chosen, else
    ``green_ctx``); a named backend stays."""
    if mapping_backend != "auto":
        return mapping_backend
    return "mps" if host_backend == "mps" else "green_ctx"


def resolved_host_config(cfg: dict[str, Any], specs: pd.DataFrame | None = None, *, root: bool | None = None,
                         nvml: Any | None | bool = True,
                         cuda_name: Callable[[int], str | None] = _torch_name) -> dict[str, Any]:
    """``emulation.host`` with ``host_gpu`` and both backends resolved (:func:`detect_host_gpu`,
    :func:`resolve_backends`): what a host job measures with."""
    from traintime.core.specs import load_specs

    specs = load_specs() if specs is None else specs
    sm, clock = resolve_backends(cfg.get("backend", "auto"), cfg.get("clock_backend", "auto"), root=root)
    host = detect_host_gpu(cfg.get("host_gpu"), specs, nvml=nvml, cuda_name=cuda_name)
    return {**cfg, "backend": sm, "clock_backend": clock, "host_gpu": host}
