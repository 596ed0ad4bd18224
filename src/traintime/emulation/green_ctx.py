"""CUDA green-context backend (no root): run work on a stream bound to a subset of SMs, read back the count."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from traintime.core.errors import DeviceStateError
from traintime.emulation.restriction import Applied, Backend, Setting

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
            from traintime.measure.device import describe_device

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
