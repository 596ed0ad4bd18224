"""Per-op host profiles of the paper's training step (schema ``OP_PROFILE``) for the Habitat- and
NeuSight-style baselines (:mod:`traintime.emulation.baselines`).

What one profile is
    The workload of :mod:`traintime.emulation.workload` (timm model, SGD, fixed random batch) is
    built on ``device``, stepped ``warmup + 1`` times eagerly (gradients and momentum buffers exist),
    then ``repeats`` eager steps run under ``torch.profiler`` (CUDA + CPU activities on a GPU, CPU
    only on the CPU) with two dispatch modes active: torch's ``FlopCounterMode`` and, on top of it,
    :func:`op_recorder`, which sees every aten op that reaches the dispatcher (after autograd:
    forward, backward, ``zero_grad`` and the optimizer step, all threads) and wraps it in a
    profiler range ``traintime_op#<repeat>:<index>``. One row = one such aten op of the first
    repeat, in call order.

Columns and how they are obtained (approximations, stated here once)
    ``flops``: the increase of ``FlopCounterMode``'s total across the op, i.e. torch's shape-based
        formulas (``torch.utils.flop_counter``: matmul / conv / attention and their backward; every
        other op counts 0 FLOPs). The sum over rows therefore equals ``FlopCounterMode``'s total
        for the same step. Not measured, not corrected for fused or tensor-core kernels.
    ``bytes``: minimum DRAM traffic from tensor sizes: every distinct input tensor read once, every
        fresh output and every mutated argument (schema ``Tensor(a!)``) written once. A tensor's
        size is element size x elements addressed (expanded, stride-0 dimensions count once).
        Ignores caches, re-reads, workspaces and intermediate buffers of multi-kernel ops.
        Write-only ops (:data:`WRITE_ONLY_OPS`, e.g. ``zero_``) do not read their target. Pure alias
        ops (views, ``detach``: no argument written, every output sharing an input's storage) move
        no data and give no row.
    ``time_ms``: on CUDA, the summed device time of the kernels, memcpys and memsets the op
        launched, found through the profiler's correlation ids (launch API call inside the op's
        range; the kernel's ``External id`` as a fallback); minimum over repeats (noise is
        one-sided, as in the timer). Ops that launched no device work give no row. Eager kernels,
        not CUDA-graph replays: the Habitat baseline rescales the sum to the graph-measured step
        (``habitat_predict(step_ms=...)``).
        On the CPU, the profiler's duration of the op's innermost aten event; CPU rows exist
        for tests and plumbing only (``device='cpu'``) and are never a result.
    ``blocks``: thread blocks (grid x * y * z) of the op's longest kernel, from the kernel event's
        ``grid`` in the profiler trace; ``threads_per_block`` likewise from ``block``. Empty when no
        kernel reports a grid (memcpy/memset only, CPU): the baselines then treat the op as
        unknown (NeuSight: many waves, utilisation ``sigmoid(g)``; Habitat: general formula, no
        small-kernel rule). Waves are ``ceil(blocks / SMs)`` of the longest kernel only; the other
        kernels of a multi-kernel op (e.g. cuDNN transforms) are folded into its time.
    Extra columns (schema ``OP_PROFILE`` allows them): ``device`` (cuda | cpu), ``kernels`` (device
    activities attributed to the op), ``threads_per_block``, ``main_kernel`` (longest kernel's name,
    truncated to :data:`KERNEL_NAME_CHARS` characters).

Profiling overhead (two Python dispatch modes and one profiler range per op) slows the host side,
not the kernels: device times stay those of the eager kernels. Device time not attributed to any
op is reported in the frame's ``attrs['unattributed_ms']`` and logged.

:func:`host_ops_job` is the config-driven entry point (rule ``emulation_host_ops``): it refuses any
device but the configured host GPU, profiles every configured workload on the unrestricted device
and writes one validated CSV when all are done (workloads that run out of memory are skipped and
logged: the schema has no row for them).
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import DeviceStateError, SchemaError, TraintimeError
from traintime.core.io import write_csv
from traintime.emulation.baselines import OP_PROFILE
from traintime.emulation.op_trace import (
    PREFIX,
    OpTiming,
    TraceAttribution,
    attribute_trace,
)
from traintime.emulation.workload import TrainStep, WorkloadSpec, make_workload

log = logging.getLogger(__name__)

WARMUP = 3
REPEATS = 3
#: Ops whose mutated argument is only written (its old content is not read).
WRITE_ONLY_OPS = frozenset({"aten::zero_", "aten::fill_", "aten::_foreach_zero_", "aten::normal_",
                            "aten::uniform_", "aten::random_", "aten::copy_"})
#: Columns written after the ``OP_PROFILE`` ones.
EXTRA_COLUMNS: tuple[str, ...] = ("device", "kernels", "threads_per_block", "main_kernel")

WorkloadFactory = Callable[[WorkloadSpec, Any], TrainStep]


# --------------------------------------------------------------------------------------------
# bytes of one op
# --------------------------------------------------------------------------------------------

def _tensors(obj: Any) -> list[Any]:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(obj) if isinstance(t, torch.Tensor)]


def tensor_span_bytes(t: Any) -> int:
    """Bytes a tensor addresses: element size x product of the sizes of its non-broadcast
    (stride != 0) dimensions. An expanded (B, C) view of a (C,) vector counts C elements."""
    n = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride != 0:
            n *= int(size)
    return n * int(t.element_size()) if t.numel() else 0


def _storage_ptr(t: Any) -> int | None:
    """Identity of a tensor's storage: its data pointer, or on the meta device (where every data
    pointer is 0) the address of the storage object itself, which views share."""
    try:
        st = t.untyped_storage()
        return int(st._cdata) if t.device.type == "meta" else int(st.data_ptr())
    except Exception:  # tensors without storage (none in the paper's workload)
        return None


def _ident(t: Any) -> tuple[int, tuple[int, ...], tuple[int, ...], str]:
    if t.device.type == "meta":
        return (int(_storage_ptr(t) or 0) + int(t.storage_offset()) * int(t.element_size()),
                tuple(t.shape), tuple(t.stride()), str(t.dtype))
    return int(t.data_ptr()), tuple(t.shape), tuple(t.stride()), str(t.dtype)


def op_bytes(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any) -> tuple[float, float, bool]:
    """(bytes read, bytes written, alias-only) of one aten op call (see the module doc).

    ``func``: the ``OpOverload``; ``args``/``kwargs``: its arguments; ``out``: its result.
    Alias-only: no argument is mutated and every output tensor shares storage with an input
    (views, ``detach``, ``_unsafe_view``): no data moves, (0, 0, True).
    """
    schema = func._schema
    mutated: list[Any] = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = args[i] if i < len(args) else kwargs.get(a.name)
            mutated.extend(_tensors(value))
    inputs = _tensors((list(args), dict(kwargs)))
    outputs = _tensors(out)
    in_storages = {p for p in (_storage_ptr(t) for t in inputs) if p is not None}
    fresh = [t for t in outputs if _storage_ptr(t) not in in_storages]
    if not mutated and not fresh and (outputs or not inputs):
        return 0.0, 0.0, True
    write_only = func.name().split(".")[0] in WRITE_ONLY_OPS
    mutated_ids = {_ident(t) for t in mutated}
    read, seen = 0, set()
    for t in inputs:
        k = _ident(t)
        if k in seen or (write_only and k in mutated_ids):
            continue
        seen.add(k)
        read += tensor_span_bytes(t)
    written, seen_w = 0, set()
    for t in [*mutated, *fresh]:
        k = _ident(t)
        if k not in seen_w:
            seen_w.add(k)
            written += tensor_span_bytes(t)
    return float(read), float(written), False


# --------------------------------------------------------------------------------------------
# recording ops
# --------------------------------------------------------------------------------------------

@dataclass
class OpRecord:
    """One aten op call seen by :func:`op_recorder`. Bytes as counts, FLOPs as counts."""

    repeat: int
    index: int
    name: str
    flops: float
    read_bytes: float
    write_bytes: float
    alias: bool

    @property
    def label(self) -> str:
        return f"{PREFIX}{self.repeat}:{self.index}"

    @property
    def base_name(self) -> str:
        """Operator name without the overload (``aten::add_``), as the profiler names its event."""
        return self.name.split(".")[0]


def _range(name: str) -> Any:
    """A profiler range that does not itself go through the dispatcher when torch offers one."""
    import torch

    fast = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None)
    if fast is not None:
        return fast(name)
    return torch.profiler.record_function(name)


def op_recorder(counter: Any) -> Any:
    """A dispatch mode recording every aten op (name, FLOPs, bytes) inside a profiler range.

    Enter it inside an active ``torch.utils.flop_counter.FlopCounterMode`` (entered first, so the
    recorder sits on top of it and reads the counter's total before and after each op):
    ``with counter, op_recorder(counter) as rec: step()``. ``rec.repeat`` sets the repeat number of
    the range labels; ``rec.records`` holds :class:`OpRecord` objects in call order. Ops of the
    ``profiler`` namespace (``record_function``'s own) pass through unrecorded.
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Recorder(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.repeat = 0
            self.records: list[OpRecord] = []
            self._next: dict[int, int] = {}

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if getattr(func, "namespace", "") == "profiler":
                return func(*args, **kwargs)
            index = self._next.get(self.repeat, 0)
            self._next[self.repeat] = index + 1
            before = counter.get_total_flops()
            with _range(f"{PREFIX}{self.repeat}:{index}"):
                out = func(*args, **kwargs)
            flops = float(counter.get_total_flops() - before)
            read, written, alias = op_bytes(func, args, kwargs, out)
            self.records.append(OpRecord(self.repeat, index, func.name(), flops, read, written, alias))
            return out

    return _Recorder()


# --------------------------------------------------------------------------------------------
# profiling one workload
# --------------------------------------------------------------------------------------------

def _sync(dev: Any) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def load_trace_events(text: str) -> list[dict[str, Any]]:
    """``traceEvents`` of a chrome trace; bare ``inf``/``nan`` values (which some profiler builds
    write for occupancy fields) are read as null."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = json.loads(re.sub(r'(?<=[:\[,])\s*-?(?:inf|nan)\b', " null", text))
    return list(data.get("traceEvents", []))


def _trace_events(prof: Any) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="traintime-ops-") as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        return load_trace_events(path.read_text())


def record_step(step: Callable[[], None], device: Any, repeats: int = REPEATS, warmup: int = WARMUP
                ) -> tuple[list[OpRecord], list[dict[str, Any]]]:
    """Run ``step`` ``warmup + 1`` times, then ``repeats`` times under the profiler and the
    recording modes; return the op records and the profiler's chrome-trace events."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    dev = torch.device(device)
    for _ in range(int(warmup) + 1):
        step()
    _sync(dev)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    counter = FlopCounterMode(display=False)
    recorder = op_recorder(counter)
    with profile(activities=activities, record_shapes=False, with_stack=False) as prof:
        with counter, recorder:
            for r in range(max(1, int(repeats))):
                recorder.repeat = r
                step()
            _sync(dev)
    return list(recorder.records), _trace_events(prof)


def ops_frame(records: Sequence[OpRecord], attribution: TraceAttribution, spec: WorkloadSpec, host_gpu: str,
              device: str, synthetic: bool = False) -> pd.DataFrame:
    """``OP_PROFILE`` rows (plus :data:`EXTRA_COLUMNS`) from the records of every repeat.

    Rows come from repeat 0 in call order; ``time_ms`` is the minimum over repeats whose op
    sequence matches repeat 0 (a repeat that differs is ignored, with a warning; on CUDA, a repeat
    in which no device work of the op was found is ignored for that op). Alias-only ops,
    and on CUDA ops that launched no device work, give no row (see the module doc).
    """
    by_repeat: dict[int, list[OpRecord]] = {}
    for r in records:
        by_repeat.setdefault(r.repeat, []).append(r)
    if 0 not in by_repeat:
        raise DeviceStateError(f"{spec.model}: no op was recorded during the profiled step")
    first = sorted(by_repeat[0], key=lambda r: r.index)
    seq = [r.name for r in first]
    others = []
    for rep, recs in sorted(by_repeat.items()):
        if rep == 0:
            continue
        recs = sorted(recs, key=lambda r: r.index)
        if [r.name for r in recs] == seq:
            others.append(recs)
        else:
            log.warning("%s: repeat %d ran another op sequence; its timings are ignored", spec.model, rep)
    rows = []
    for pos, rec in enumerate(first):
        timing = attribution.ops.get(rec.label, OpTiming())
        if rec.alias or (device == "cuda" and timing.kernels == 0 and rec.flops == 0):
            continue
        later = [attribution.ops.get(o[pos].label, OpTiming()) for o in others]
        # on CUDA a repeat counts only where the op's device work was found in the trace
        times = [timing.time_ms] + [t.time_ms for t in later if device != "cuda" or t.kernels > 0]
        rows.append({
            "host_gpu": host_gpu, **spec.key(), "op_index": len(rows), "op_name": rec.name,
            "flops": rec.flops, "bytes": rec.read_bytes + rec.write_bytes, "time_ms": float(min(times)),
            "blocks": timing.blocks, "synthetic": bool(synthetic), "device": device,
            "kernels": int(timing.kernels), "threads_per_block": timing.threads_per_block,
            "main_kernel": timing.main_kernel})
    if not rows:
        raise DeviceStateError(f"{spec.model}: the profiled step has no op with device work")
    df = pd.DataFrame(rows, columns=[*OP_PROFILE.names, *EXTRA_COLUMNS])
    df = OP_PROFILE.validate(df, source=f"op profile of {spec.model}")
    df.attrs["unattributed_ms"] = attribution.unattributed_ms
    df.attrs["device_ms"] = attribution.device_ms
    return df


def profile_ops(spec: WorkloadSpec, device: Any, host_gpu: str, *, repeats: int = REPEATS, warmup: int = WARMUP,
                synthetic: bool = False, step: TrainStep | None = None,
                workload_factory: WorkloadFactory | None = None) -> pd.DataFrame:
    """Per-op profile of one training step of ``spec`` on ``device`` (schema ``OP_PROFILE``).

    ``host_gpu``: canonical name written in the rows (``cpu`` for CPU runs); ``repeats``: profiled
    steps (per-op time = minimum); ``step``: a prepared workload to use (not released here);
    otherwise one is built (``workload_factory`` or :func:`make_workload`) and released after.
    Exceptions (out of memory included) propagate. ``attrs['unattributed_ms']`` /
    ``attrs['device_ms']``: device time no op claimed / all device time profiled (ms, all repeats).
    """
    import torch

    dev = torch.device(device)
    own = step is None
    if own:
        step = (workload_factory or (lambda s, d: make_workload(s, d)))(spec, dev)
    try:
        records, events = record_step(step, dev, repeats=repeats, warmup=warmup)
    finally:
        if own and step is not None and hasattr(step, "release"):
            step.release()
    names = {r.label: r.base_name for r in records}
    attribution = attribute_trace(events, names, "cuda" if dev.type == "cuda" else "cpu")
    if attribution.device_ms > 0 and attribution.unattributed_ms > 0.01 * attribution.device_ms:
        log.warning("%s %dpx: %.1f%% of the profiled device time (%.3f ms) could not be attributed to an op",
                    spec.model, spec.img_px, 100 * attribution.unattributed_ms / attribution.device_ms,
                    attribution.unattributed_ms)
    return ops_frame(records, attribution, spec, host_gpu, "cuda" if dev.type == "cuda" else "cpu",
                     synthetic=synthetic)


def ops_to_frame(frames: Sequence[pd.DataFrame], source: str = "op profiles") -> pd.DataFrame:
    """Concatenate profiles, validate against ``OP_PROFILE`` and sort by its key (stable output)."""
    if not frames:
        raise SchemaError(f"{source}: no op profile to write")
    df = pd.concat(frames, ignore_index=True)
    df = OP_PROFILE.validate(df, source=source)
    cols = [*OP_PROFILE.names, *[c for c in df.columns if c not in OP_PROFILE.names]]
    return df.sort_values(list(OP_PROFILE.key), kind="mergesort")[cols].reset_index(drop=True)


def profile_workloads(workloads: Sequence[WorkloadSpec], device: Any, host_gpu: str, *,
                      repeats: int = REPEATS, synthetic: bool = False,
                      deadline: float | None = None, profiler: Callable[..., pd.DataFrame] | None = None
                      ) -> tuple[list[pd.DataFrame], list[str]]:
    """Profile each workload; returns (frames, skipped). A workload that runs out of memory or
    fails is skipped with a logged reason (``skipped`` entries: ``"<model> <img>px b<B> <prec>: why"``);
    user errors (:class:`~traintime.core.errors.TraintimeError`) propagate. ``deadline``: a
    ``time.time()`` after which remaining workloads are skipped (``"...: time budget"``)."""
    import time

    from traintime.emulation.timer import free_device_memory, is_oom

    run = profiler or profile_ops
    frames, skipped = [], []
    for w in workloads:
        label = f"{w.model} {w.img_px}px b{w.batch_size} {w.precision}"
        if deadline is not None and time.time() > deadline:
            skipped.append(f"{label}: time budget")
            continue
        try:
            df = run(w, device, host_gpu, repeats=repeats, synthetic=synthetic)
            frames.append(df)
            log.info("%s: %d ops, %.3f ms summed op time, %.3g GFLOP", label, len(df), df["time_ms"].sum(),
                     df["flops"].sum() / 1e9)
        except TraintimeError:
            raise
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else ""
            why = "out of memory" if is_oom(exc) else f"{type(exc).__name__}: {first}"
            log.warning("%s: not profiled (%s)", label, why, exc_info=not is_oom(exc))
            skipped.append(f"{label}: {why}")
        finally:
            free_device_memory()
    return frames, skipped


def host_ops_job(cfg: Mapping[str, Any], out_path: str | os.PathLike[str], specs: pd.DataFrame | None = None,
                 profiler: Callable[..., pd.DataFrame] | None = None, info: Any = None) -> pd.DataFrame:
    """Config-driven per-op profiles (``emulation.host``; rule ``emulation_host_ops``).

    Workloads: ``models`` x ``img_sizes`` x ``ops_batch_sizes`` x ``ops_precisions`` on the whole,
    unrestricted device, which must be ``host_gpu`` (else :class:`~traintime.core.errors.DeviceStateError`).
    Writes one CSV at the end; raises when no workload could be profiled.
    """
    from traintime.emulation.sweep import workload_grid
    from traintime.measure.device import check_expected_device, describe_device

    workloads = workload_grid(cfg["models"], cfg["img_sizes"], cfg["ops_batch_sizes"], cfg["ops_precisions"])
    host = check_expected_device(cfg["host_gpu"], specs, info=describe_device() if info is None else info)
    log.info("per-op profiles on %s: %d workload(s), unrestricted device", host, len(workloads))
    frames, skipped = profile_workloads(workloads, "cuda", host, profiler=profiler)
    if not frames:
        raise DeviceStateError(f"{out_path}: no workload could be profiled ({'; '.join(skipped)})")
    if skipped:
        log.warning("not profiled: %s", "; ".join(skipped))
    df = ops_to_frame(frames, source=str(out_path))
    write_csv(df, out_path)
    return df
