"""Attribute device time in a torch.profiler chrome trace to the ops recorded by the FLOP counter."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Name prefix of the profiler range around each recorded op: ``traintime_op#<repeat>:<index>``.
PREFIX = "traintime_op#"
#: Trace categories of device activities (time on the GPU).
DEVICE_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
#: Trace categories of host-side launch calls (carry the correlation id of what they launched).
LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver"})
#: Trace categories of the host-side op ranges (not ``gpu_user_annotation``, their GPU-timeline copy).
RANGE_CATS = frozenset({"cpu_op", "user_annotation"})
KERNEL_NAME_CHARS = 160


# --------------------------------------------------------------------------------------------
# attributing device time to ops (chrome trace of torch.profiler)
# --------------------------------------------------------------------------------------------

@dataclass
class OpTiming:
    """Time attributed to one recorded op. ``time_ms``: device (CUDA) or CPU time, ms."""

    time_ms: float = 0.0
    kernels: int = 0
    blocks: float | None = None
    threads_per_block: float | None = None
    main_kernel: str | None = None
    _longest_us: float = field(default=-1.0, repr=False)

    def add(self, dur_us: float, name: str, args: Mapping[str, Any]) -> None:
        self.time_ms += dur_us / 1e3
        self.kernels += 1
        if dur_us > self._longest_us:
            self._longest_us = dur_us
            grid, block = args.get("grid"), args.get("block")
            self.blocks = float(np.prod(grid)) if _dims(grid) else None
            self.threads_per_block = float(np.prod(block)) if _dims(block) else None
            self.main_kernel = name[:KERNEL_NAME_CHARS]


def _dims(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, (int, float)) and x > 0 for x in v)


@dataclass
class TraceAttribution:
    """Per-label timings and the device time no label claimed (ms)."""

    ops: dict[str, OpTiming]
    unattributed_ms: float
    device_ms: float


class _Intervals:
    """Non-overlapping labelled ranges of one thread, searchable by time."""

    def __init__(self, items: Iterable[tuple[float, float, str]]) -> None:
        srt = sorted(items)
        self.starts = [s for s, _, _ in srt]
        self.ends = [s + d for s, d, _ in srt]
        self.labels = [lab for _, _, lab in srt]

    def find(self, ts: float) -> str | None:
        i = bisect.bisect_right(self.starts, ts) - 1
        if i >= 0 and ts <= self.ends[i]:
            return self.labels[i]
        return None


def attribute_trace(events: Sequence[Mapping[str, Any]], names: Mapping[str, str], device: str,
                    prefix: str = PREFIX) -> TraceAttribution:
    """Attribute the profiled time of a chrome trace (``traceEvents``) to the op ranges in it.

    ``names``: range label -> the op's operator name without overload (``aten::mm``) for every
    recorded op; ``device``: ``cuda`` (device activities, see the module doc) or ``cpu`` (the
    innermost, i.e. latest-starting, event named like the op inside its range on the same thread:
    the dispatcher records the op once on entry, around the FLOP counter's Python code, and again
    around the op's own work; the range's own duration if there is none). Durations in the trace are microseconds.
    """
    ranges: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    label_at: dict[str, tuple[Any, Any, float, float]] = {}
    cpu_by_thread: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    external: dict[Any, tuple[Any, Any, float]] = {}
    launches: dict[Any, tuple[Any, Any, float]] = {}
    device_events = []
    for e in events:
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat"), str(e.get("name", ""))
        ts, dur = float(e.get("ts", 0.0)), float(e.get("dur", 0.0))
        thread = (e.get("pid"), e.get("tid"))
        args = e.get("args") or {}
        if cat in RANGE_CATS and name.startswith(prefix) and name in names:
            ranges.setdefault(thread, []).append((ts, dur, name))
            label_at[name] = (*thread, ts, dur)
        elif cat in DEVICE_CATS:
            device_events.append(e)
        elif cat in LAUNCH_CATS and "correlation" in args:
            launches[args["correlation"]] = (*thread, ts)
        elif cat in ("cpu_op", "user_annotation"):
            cpu_by_thread.setdefault(thread, []).append((ts, dur, name))
            if "External id" in args:
                external[args["External id"]] = (*thread, ts)
    index = {th: _Intervals(items) for th, items in ranges.items()}
    anywhere = _Intervals(it for items in ranges.values() for it in items)

    def owner(where: tuple[Any, Any, float] | None) -> str | None:
        if where is None:
            return None
        pid, tid, ts = where
        iv = index.get((pid, tid))
        found = iv.find(ts) if iv is not None else None
        return found if found is not None else anywhere.find(ts)

    ops = {label: OpTiming() for label in names}
    unattributed = total = 0.0
    if device == "cuda":
        for e in device_events:
            args = e.get("args") or {}
            dur = float(e.get("dur", 0.0))
            total += dur / 1e3
            label = owner(launches.get(args.get("correlation")))
            if label is None:
                label = owner(external.get(args.get("External id")))
            if label is None:
                unattributed += dur / 1e3
                continue
            ops[label].add(dur, str(e.get("name", "")), args)
        return TraceAttribution(ops, unattributed, total)
    for th in cpu_by_thread:
        cpu_by_thread[th].sort()
    for label, (pid, tid, ts, dur) in label_at.items():
        evs = cpu_by_thread.get((pid, tid), [])
        lo = bisect.bisect_left(evs, (ts, -np.inf, ""))
        best = None  # the innermost (latest-starting) event named like the op: the op's own work,
        for s, d, n in evs[lo:]:  # not the outer event that also spans the FLOP counter's Python code
            if s > ts + dur:
                break
            if n == names[label] and s + d <= ts + dur:
                best = d
        t = best if best is not None else dur
        ops[label].time_ms = t / 1e3
        total += t / 1e3
    return TraceAttribution(ops, 0.0, total)
