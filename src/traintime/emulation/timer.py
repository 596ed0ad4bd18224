"""The zero-shot paper's training-step timer, and one host-latency row per measurement.

CUDA timer (:func:`time_cuda_graph`), as the traces were measured:

1. one eager step, then synchronize (gradients and momentum buffers exist before capture);
2. warm-up: 3 steps on a side stream;
3. capture a CUDA graph of ``iters`` steps (floor 2) and replay it once;
4. time one replay with CUDA events; if it is under 2 ms, raise ``iters`` to reach 2 ms (at most
   200) and recapture (amortises the graph launch);
5. 10 timed replays; latency = **minimum** replay / ``iters`` (noise is one-sided).

Under a green context every stream (work, side, capture) comes from the context's
``stream_factory``; without one the calls are exactly the plain torch ones.

CPU fallback (:func:`time_cpu`): NOT the paper's timer. It exists so the code path runs in tests
on machines without CUDA: ``perf_counter`` around ``iters`` eager steps, minimum over replays.
Rows it produces have ``device_name='cpu'`` and say so in ``note``.

Out-of-memory never crashes a sweep: it becomes a row with ``oom=True`` and ``status='oom'``;
memory is freed after every measurement.
"""

from __future__ import annotations

import gc
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from traintime.emulation.restriction import Applied
from traintime.emulation.schema import HOST_LATENCY
from traintime.emulation.workload import TrainStep, WorkloadSpec, make_workload

log = logging.getLogger(__name__)

WARMUP = 3
MIN_ITERS = 2
MIN_REPLAY_MS = 2.0
MAX_ITERS = 200
REPLAYS = 10
#: refuse to capture when this share of device memory is already used (capture cannot free cache)
CAPTURE_MEMORY_GUARD = 0.99

CPU_TIMER_NOTE = "CPU fallback timer (perf_counter over eager steps), not the paper's CUDA-graph timer"


@dataclass
class Timing:
    """Outcome of timing one step function. ``latency_ms``: min replay / iters (None on failure)."""

    latency_ms: float | None
    iters: int | None
    replays: int
    timer: str
    clock_mhz: float | None = None
    notes: list[str] = field(default_factory=list)


def is_oom(exc: BaseException) -> bool:
    """True for every way a CUDA out-of-memory reaches Python."""
    try:
        import torch

        if isinstance(exc, torch.cuda.OutOfMemoryError):
            return True
    except ImportError:  # pragma: no cover
        pass
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(
        s in text for s in ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
                            "cudaErrorMemoryAllocation"))


def _capture_headroom_guard() -> None:
    """Raise OutOfMemoryError before capturing when the device is (almost) full: a capture that
    runs out of memory can corrupt the allocator's graph pools for the rest of the process."""
    import torch

    free, total = torch.cuda.mem_get_info()
    used = (total - free) / total if total else 0.0
    if used >= CAPTURE_MEMORY_GUARD:
        raise torch.cuda.OutOfMemoryError(f"{100 * used:.1f}% of device memory in use before graph capture")


def repair_after_failed_capture() -> None:
    """Best effort after a failed capture: finish one trivial capture so the CUDA RNG generator is
    no longer marked as capturing (otherwise every later random op in the process fails)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.zeros(1, device="cuda").add_(1.0)
        g.replay()
        torch.cuda.synchronize()
    except Exception:  # nothing more can be done; the original error is reported by the caller
        pass


def _sync(*streams: Any) -> None:
    """``torch.cuda.synchronize()`` and, explicitly, each stream: a device synchronize covers the
    current (primary) context only, not the streams of a green context."""
    import torch

    torch.cuda.synchronize()
    for s in streams:
        if s is not None:
            s.synchronize()


def _replay_ms(graph: Any, use_events: bool, stream: Any) -> float:
    """Time one replay on the current stream: CUDA events, or synchronize + perf_counter."""
    import torch

    if use_events:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        _sync(stream)
        return float(start.elapsed_time(end))
    _sync(stream)
    t0 = time.perf_counter()
    graph.replay()
    _sync(stream)
    return (time.perf_counter() - t0) * 1e3


def time_cuda_graph(step: Callable[[], None], *, warmup: int = WARMUP, iters: int = MIN_ITERS,
                    replays: int = REPLAYS, min_replay_ms: float = MIN_REPLAY_MS, max_iters: int = MAX_ITERS,
                    stream_factory: Callable[[], Any] | None = None,
                    clock_reader: Callable[[], float | None] | None = None) -> Timing:
    """Time ``step`` with the paper's CUDA-graph protocol (see the module doc).

    ``stream_factory``: returns new streams all work must run on (green context); None = torch's
    current stream, a fresh side stream and torch's default capture stream.
    ``clock_reader``: SM clock (MHz) read after each timed replay; the maximum is recorded.
    Exceptions propagate (the caller turns OOM into a row); a failed capture is repaired first.
    """
    import torch

    iters = max(MIN_ITERS, int(iters))
    notes: list[str] = []
    new_stream = stream_factory or torch.cuda.Stream
    work = stream_factory() if stream_factory is not None else torch.cuda.current_stream()
    capture_stream = stream_factory() if stream_factory is not None else None

    def capture(n: int) -> Any:
        _capture_headroom_guard()
        g = torch.cuda.CUDAGraph()
        kwargs = {"stream": capture_stream} if capture_stream is not None else {}
        with torch.cuda.graph(g, **kwargs):
            for _ in range(n):
                step()
        g.replay()
        _sync(work, capture_stream)
        return g

    try:
        with torch.cuda.stream(work):
            step()
            _sync(work)
            side = new_stream()
            if stream_factory is None:
                side.wait_stream(work)
            # (green context: ordering comes from the synchronize above; no cross-context event)
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    step()
            if stream_factory is None:
                work.wait_stream(side)
            _sync(work, side)

            graph = capture(iters)
            use_events = True
            try:
                first = _replay_ms(graph, True, work)
            except RuntimeError as exc:  # events unusable on this stream (a risk under green contexts)
                use_events = False
                notes.append(f"timer=wall clock around synchronize (CUDA events failed: {exc})")
                first = _replay_ms(graph, False, work)
            if 0 < first < min_replay_ms and iters < max_iters:
                per_iter = first / iters
                iters = int(min(max_iters, math.ceil(min_replay_ms / per_iter)))
                del graph
                graph = capture(iters)
            times: list[float] = []
            clocks: list[float] = []
            for _ in range(replays):
                times.append(_replay_ms(graph, use_events, work))
                if clock_reader is not None:
                    c = clock_reader()
                    if c is not None:
                        clocks.append(float(c))
            del graph
    except Exception:
        repair_after_failed_capture()
        raise
    return Timing(latency_ms=min(times) / iters, iters=iters, replays=len(times), timer="cuda_graph",
                  clock_mhz=max(clocks) if clocks else None, notes=notes)


def time_cpu(step: Callable[[], None], *, warmup: int = WARMUP, iters: int = MIN_ITERS,
             replays: int = REPLAYS, min_replay_ms: float = MIN_REPLAY_MS, max_iters: int = MAX_ITERS) -> Timing:
    """CPU fallback: same structure as the CUDA timer with eager steps and ``perf_counter``."""
    iters = max(MIN_ITERS, int(iters))

    def window(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t0) * 1e3

    step()
    for _ in range(warmup):
        step()
    first = window(iters)
    if 0 < first < min_replay_ms and iters < max_iters:
        iters = int(min(max_iters, math.ceil(min_replay_ms / (first / iters))))
    times = [window(iters) for _ in range(replays)]
    return Timing(latency_ms=min(times) / iters, iters=iters, replays=len(times), timer="cpu_perf_counter",
                  notes=[CPU_TIMER_NOTE])


def free_device_memory() -> None:
    """Collect garbage and return cached CUDA memory to the driver."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # pragma: no cover
        pass


def _device_of(device: Any) -> Any:
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def empty_row(spec: WorkloadSpec, host_gpu: str, applied: Applied | None = None) -> dict[str, Any]:
    """A host-latency row with the workload key and restriction filled, measurement fields empty."""
    import torch

    applied = applied or Applied(backend="none")
    row: dict[str, Any] = {c: None for c in HOST_LATENCY.names}
    row.update(host_gpu=host_gpu, **spec.key(), backend=applied.backend,
               requested_sm_pct=float(applied.requested_sm_pct),
               requested_clock_mhz=applied.requested_clock_mhz, effective_sms=applied.effective_sms,
               effective_clock_mhz=applied.effective_clock_mhz, oom=False, torch_version=torch.__version__,
               status="error", note=applied.note or None, synthetic=False)
    return row


def _add_note(row: dict[str, Any], *notes: str) -> None:
    parts = [row["note"]] if row.get("note") else []
    parts += [n for n in notes if n]
    row["note"] = "; ".join(parts) if parts else None


def _failed(row: dict[str, Any], exc: BaseException, what: str, *, oom_note: str, prefix: str) -> dict[str, Any]:
    """``row`` as an oom row when ``exc`` is an out-of-memory error, else with the error as its note."""
    if is_oom(exc):
        row.update(oom=True, status="oom")
        _add_note(row, oom_note)
    else:
        log.warning("%s failed: %s", what, exc, exc_info=True)
        _add_note(row, f"{prefix}{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return row


def time_step(step: Callable[[], None], device: Any, applied: Applied | None = None, *,
              replays: int = REPLAYS, iters: int = MIN_ITERS) -> Timing:
    """Time a prepared step on ``device`` under ``applied`` (CUDA-graph timer, or the CPU fallback)."""
    dev = _device_of(device)
    applied = applied or Applied(backend="none")
    if dev.type == "cuda":
        return time_cuda_graph(step, replays=replays, iters=iters, stream_factory=applied.stream_factory,
                               clock_reader=applied.clock_reader)
    return time_cpu(step, replays=replays, iters=iters)


def measure_step(step: Callable[[], None], spec: WorkloadSpec, *, host_gpu: str, device: Any = None,
                 applied: Applied | None = None, replays: int = REPLAYS, synthetic: bool = False) -> dict[str, Any]:
    """Time a prepared ``step`` of ``spec`` and return one host-latency row (never raises for OOM
    or a failed measurement: those become ``status`` oom / error rows)."""
    import torch

    dev = _device_of(device)
    applied = applied or Applied(backend="none")
    row = empty_row(spec, host_gpu, applied)
    row["synthetic"] = bool(synthetic)
    if dev.type == "cuda":
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        row["device_name"] = torch.cuda.get_device_name(idx)
        if row["effective_sms"] is None and applied.stream_factory is None:
            # no partition in this process: the SMs the device reports here (an MPS client sees its
            # share); a green partition whose size could not be read back stays empty
            row["effective_sms"] = int(torch.cuda.get_device_properties(idx).multi_processor_count)
    else:
        row["device_name"] = "cpu"
    try:
        timing = time_step(step, dev, applied, replays=replays)
    except Exception as exc:
        return _failed(row, exc, f"measurement of {spec}", oom_note="out of memory", prefix="")
    latency = float(timing.latency_ms) * float(applied.latency_scale)
    row.update(latency_ms=latency, iters_per_replay=timing.iters, replays=timing.replays, status="ok")
    if timing.clock_mhz is not None:
        row["effective_clock_mhz"] = timing.clock_mhz
    if applied.latency_scale != 1.0:
        _add_note(row, f"measured_ms={timing.latency_ms:.6g}")
    _add_note(row, *timing.notes)
    return row


WorkloadFactory = Callable[[WorkloadSpec, Any], TrainStep]


def measure_workload(spec: WorkloadSpec, *, host_gpu: str, device: Any = None, applied: Applied | None = None,
                     replays: int = REPLAYS, synthetic: bool = False,
                     workload_factory: WorkloadFactory | None = None) -> dict[str, Any]:
    """Build ``spec``'s workload on ``device``, time it, free it; one host-latency row.

    Model creation or the first allocation running out of memory also gives an oom row. Unknown
    model names raise :class:`~traintime.core.errors.UnknownNameError` (a user error, not a row).
    """
    from traintime.core.errors import TraintimeError

    dev = _device_of(device)
    factory = workload_factory or (lambda s, d: make_workload(s, d))
    step: TrainStep | None = None
    try:
        try:
            step = factory(spec, dev)
        except TraintimeError:
            raise
        except Exception as exc:
            row = empty_row(spec, host_gpu, applied)
            row["synthetic"] = bool(synthetic)
            row["device_name"] = "cpu" if dev.type == "cpu" else None
            return _failed(row, exc, f"building {spec}", oom_note="out of memory while building the workload",
                           prefix="build failed: ")
        return measure_step(step, spec, host_gpu=host_gpu, device=dev, applied=applied, replays=replays,
                            synthetic=synthetic)
    finally:
        if step is not None and hasattr(step, "release"):
            step.release()
        del step
        free_device_memory()
