"""Read-only description of the compute device a measurement runs on.

Nothing here changes device state: it reads torch's device properties and, when the NVIDIA
management library (``pynvml`` from ``nvidia-ml-py``) answers, the driver version and the current
and maximum SM clocks. On a machine without CUDA the device is ``cpu``.

:func:`check_expected_device` refuses to measure when the GPU actually present is not the one a
job was meant to measure (names compared through :mod:`traintime.core.specs` aliases), so a sweep
planned for an RTX 5090 never silently writes rows measured on another card.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from types import ModuleType
from typing import Any

import pandas as pd

from traintime.core.errors import DeviceStateError, UnknownNameError
from traintime.core.specs import canonical_gpu, load_specs

log = logging.getLogger(__name__)

CPU = "cpu"


@dataclass(frozen=True)
class DeviceInfo:
    """What the measuring process sees. Units: memory in GiB, clocks in MHz."""

    name: str
    is_cuda: bool
    index: int | None = None
    sms: int | None = None
    compute_capability: str | None = None
    memory_gib: float | None = None
    torch_version: str | None = None
    cuda_runtime: str | None = None
    driver_version: str | None = None
    sm_clock_mhz: float | None = None
    max_sm_clock_mhz: float | None = None

    @property
    def cc_tuple(self) -> tuple[int, int] | None:
        if not self.compute_capability:
            return None
        major, minor = self.compute_capability.split(".")
        return int(major), int(minor)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_nvml() -> ModuleType | None:
    """The ``pynvml`` module, initialised, or None when it is missing or no driver answers."""
    try:
        import pynvml  # type: ignore[import-untyped]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError (no driver, no device) or a missing library
        log.debug("NVML unavailable: %s", exc)
        return None
    return pynvml


def nvml_handle(nvml: Any, cuda_index: int = 0) -> Any:
    """NVML handle of the GPU that CUDA calls device ``cuda_index`` in this process.

    NVML numbers all GPUs of the node and ignores ``CUDA_VISIBLE_DEVICES``; under SLURM (or any
    restricted visibility) index 0 may be another job's GPU. When CUDA is up, the device is
    therefore looked up by its UUID; otherwise by index.
    """
    try:
        import torch

        if torch.cuda.is_available() and hasattr(nvml, "nvmlDeviceGetHandleByUUID"):
            uuid = str(torch.cuda.get_device_properties(cuda_index).uuid)
            key = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            return nvml.nvmlDeviceGetHandleByUUID(key)
    except Exception as exc:  # old torch without .uuid, NVML refusing the UUID form
        log.debug("NVML lookup by UUID failed (%s); using the index", exc)
    return nvml.nvmlDeviceGetHandleByIndex(cuda_index)


def _nvml_read(nvml: ModuleType, index: int) -> dict[str, Any]:
    """Driver version and SM clocks through NVML (read-only calls only). Missing values -> None."""
    out: dict[str, Any] = {}
    try:
        handle = nvml_handle(nvml, index)
    except Exception:
        return out
    for key, call in (
        ("driver_version", lambda: nvml.nvmlSystemGetDriverVersion()),
        ("sm_clock_mhz", lambda: float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM))),
        ("max_sm_clock_mhz", lambda: float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))),
        ("nvml_name", lambda: nvml.nvmlDeviceGetName(handle)),
    ):
        try:
            value = call()
            out[key] = value.decode() if isinstance(value, bytes) else value
        except Exception:
            out[key] = None
    return out


def describe_device(index: int = 0, nvml: ModuleType | None | bool = True,
                    init_cuda: bool = True) -> DeviceInfo:
    """Describe CUDA device ``index`` (or the CPU when torch has no CUDA).

    ``nvml``: a pynvml-like module, ``True`` to load the real one, ``False``/None to skip NVML.
    ``init_cuda=False`` reads only NVML (the parent of MPS clients must not create a CUDA context
    before the MPS daemon starts); the name then comes from NVML.
    """
    import torch

    nv = load_nvml() if nvml is True else (nvml or None)
    nv_vals = _nvml_read(nv, index) if nv is not None else {}
    if not init_cuda:
        name = nv_vals.get("nvml_name")
        if not name:
            return DeviceInfo(name=CPU, is_cuda=False, torch_version=torch.__version__)
        return DeviceInfo(name=str(name), is_cuda=True, index=index, torch_version=torch.__version__,
                          cuda_runtime=torch.version.cuda, driver_version=nv_vals.get("driver_version"),
                          sm_clock_mhz=nv_vals.get("sm_clock_mhz"),
                          max_sm_clock_mhz=nv_vals.get("max_sm_clock_mhz"))
    if not torch.cuda.is_available():
        from traintime.measure.device_request import fake_gpu

        if fake_gpu():  # test-only hook (traintime.measure.device_request): the CPU under a GPU name
            return DeviceInfo(name=str(fake_gpu()), is_cuda=True, index=index, torch_version=torch.__version__)
        return DeviceInfo(name=CPU, is_cuda=False, torch_version=torch.__version__)
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(
        name=torch.cuda.get_device_name(index),
        is_cuda=True,
        index=index,
        sms=int(props.multi_processor_count),
        compute_capability=f"{props.major}.{props.minor}",
        memory_gib=round(props.total_memory / 2**30, 3),
        torch_version=torch.__version__,
        cuda_runtime=torch.version.cuda,
        driver_version=nv_vals.get("driver_version"),
        sm_clock_mhz=nv_vals.get("sm_clock_mhz"),
        max_sm_clock_mhz=nv_vals.get("max_sm_clock_mhz"),
    )


def check_expected_device(expected_gpu: str, specs: pd.DataFrame | None = None,
                          info: DeviceInfo | None = None) -> str:
    """Return the canonical name of ``expected_gpu`` if that GPU is the one present.

    Raises :class:`~traintime.core.errors.DeviceStateError` when there is no CUDA device, or when the
    device's name resolves (through the spec table's aliases) to another GPU or to none.
    Raises :class:`~traintime.core.errors.UnknownNameError` when ``expected_gpu`` itself is unknown.
    """
    specs = load_specs() if specs is None else specs
    expected = canonical_gpu(expected_gpu, specs)
    info = describe_device() if info is None else info
    if not info.is_cuda:
        raise DeviceStateError(f"expected to measure on GPU {expected!r}, but no CUDA device is present "
                               "(the host sweep needs the GPU it is configured for)")
    try:
        actual = canonical_gpu(info.name, specs)
    except UnknownNameError:
        raise DeviceStateError(
            f"expected to measure on GPU {expected!r}, but the device present is {info.name!r}, "
            "which is not in the GPU spec table") from None
    if actual != expected:
        raise DeviceStateError(f"expected to measure on GPU {expected!r}, but the device present is "
                               f"{info.name!r} ({actual}); refusing to write rows for the wrong GPU")
    return expected
