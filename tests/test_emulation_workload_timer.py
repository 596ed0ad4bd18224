"""The CUDA-graph timer's protocol, driven by a fake ``torch.cuda`` with a simulated clock.

No GPU here: the fake records streams, captures and replays and advances a clock by a known
per-step cost, so the tests check the paper's protocol (eager step, 3 warm-up steps on a side
stream, capture of ``iters`` steps, raise ``iters`` to reach 2 ms (cap 200), 10 timed replays,
minimum / iters) and the green-context stream plumbing.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from traintime.emulation import timer


class FakeCuda:
    def __init__(self, per_step_ms: float, noise: list[float] | None = None, mem_used: float = 0.1) -> None:
        self.per_step = per_step_ms
        self.noise = list(noise or [])
        self.mem_used = mem_used
        self.t = 0.0
        self.capturing: FakeGraph | None = None
        self.current = "default"
        self.log: list[tuple] = []
        self.n_streams = 0

    # what a step does
    def step(self) -> None:
        if self.capturing is not None:
            self.capturing.n += 1
            self.log.append(("captured_step", self.current))
        else:
            self.t += self.per_step
            self.log.append(("eager_step", self.current))


class FakeStream:
    def __init__(self, cuda: FakeCuda, name: str) -> None:
        self.cuda, self.name = cuda, name

    def wait_stream(self, other: FakeStream) -> None:
        self.cuda.log.append(("wait", self.name, other.name))

    def synchronize(self) -> None:
        self.cuda.log.append(("sync_stream", self.name))


class FakeGraph:
    cuda: FakeCuda

    def __init__(self) -> None:
        self.n = 0

    def replay(self) -> None:
        c = self.cuda
        c.t += self.n * c.per_step + (c.noise.pop(0) if c.noise else 0.0)
        c.log.append(("replay", self.n, c.current))


class FakeEvent:
    cuda: FakeCuda

    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None

    def record(self) -> None:
        self.at = self.cuda.t

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return end.at - self.at


@pytest.fixture()
def fake_cuda(monkeypatch):
    def install(per_step_ms: float, noise=None, mem_used: float = 0.1) -> FakeCuda:
        cuda = FakeCuda(per_step_ms, noise, mem_used)
        graph_cls = type("G", (FakeGraph,), {"cuda": cuda})
        event_cls = type("E", (FakeEvent,), {"cuda": cuda})

        def new_stream() -> FakeStream:
            cuda.n_streams += 1
            return FakeStream(cuda, f"side{cuda.n_streams}")

        @contextlib.contextmanager
        def stream(s):
            prev, cuda.current = cuda.current, s.name
            try:
                yield
            finally:
                cuda.current = prev

        @contextlib.contextmanager
        def graph(g, **kw):
            cuda.log.append(("capture", kw.get("stream").name if kw.get("stream") else None))
            cuda.capturing = g
            try:
                yield
            finally:
                cuda.capturing = None

        for name, value in {
            "Stream": new_stream, "current_stream": lambda: FakeStream(cuda, "default"), "stream": stream,
            "graph": graph, "CUDAGraph": graph_cls, "Event": event_cls, "synchronize": lambda: None,
            "mem_get_info": lambda: (int((1 - cuda.mem_used) * 1000), 1000),
        }.items():
            monkeypatch.setattr(torch.cuda, name, value)
        return cuda

    return install


def test_protocol_raises_iters_to_two_ms_and_takes_the_minimum(fake_cuda):
    cuda = fake_cuda(0.3, noise=[0.0, 0.0, 0.0, 0.5, 0.05, 0.9, 0.0, 0.3, 0.2, 0.1, 0.4, 0.7, 0.6])
    t = timer.time_cuda_graph(cuda.step)
    # first capture holds 2 steps; 0.6 ms < 2 ms -> ceil(2 / 0.3) = 7 steps per replay
    assert t.iters == 7 and t.replays == 10 and t.timer == "cuda_graph"
    assert t.latency_ms == pytest.approx(0.3)  # minimum replay (no noise) / iters
    eager = [e for e in cuda.log if e[0] == "eager_step"]
    assert eager[0] == ("eager_step", "default")  # the one eager step on the work stream
    assert [e[1] for e in eager[1:]] == ["side1"] * 3  # warm-up: 3 steps on a side stream
    assert ("wait", "side1", "default") in cuda.log and ("wait", "default", "side1") in cuda.log
    captured = [e for e in cuda.log if e[0] == "capture"]
    assert len(captured) == 2 and captured[0] == ("capture", None)  # torch's own capture stream
    assert sum(1 for e in cuda.log if e[0] == "captured_step") == 2 + 7
    replays = [e for e in cuda.log if e[0] == "replay"]
    assert [r[1] for r in replays] == [2, 2, 7] + [7] * 10  # warm replay, timing replay, recapture, 10 timed


def test_slow_steps_keep_two_iters(fake_cuda):
    cuda = fake_cuda(5.0, noise=[0, 0, 3.0, 1.0] + [2.0] * 7 + [0.5])  # 10 timed: min 0.5
    t = timer.time_cuda_graph(cuda.step)
    assert t.iters == 2
    assert t.latency_ms == pytest.approx((10.0 + 0.5) / 2)
    assert sum(1 for e in cuda.log if e[0] == "capture") == 1


def test_iters_capped_at_200(fake_cuda):
    cuda = fake_cuda(0.001)
    t = timer.time_cuda_graph(cuda.step)
    assert t.iters == 200 and t.latency_ms == pytest.approx(0.001)


def test_green_streams_carry_all_work(fake_cuda):
    cuda = fake_cuda(1.0)
    made = []

    def green_stream():
        made.append(FakeStream(cuda, f"green{len(made)}"))
        return made[-1]

    t = timer.time_cuda_graph(cuda.step, stream_factory=green_stream, clock_reader=lambda: 1500.0)
    assert t.clock_mhz == 1500.0
    # work stream, capture stream and side stream all come from the green context
    assert len(made) == 3 and cuda.n_streams == 0
    steps = [e[1] for e in cuda.log if e[0] in ("eager_step", "captured_step")]
    assert set(steps) <= {"green0", "green2"} and steps[:4] == ["green0", "green2", "green2", "green2"]
    assert ("capture", "green1") in cuda.log
    assert all(r[2] == "green0" for r in cuda.log if r[0] == "replay")
    # green-context streams are synchronized explicitly (device sync covers the primary context only),
    # and no cross-context event orders them
    assert ("sync_stream", "green0") in cuda.log
    assert not any(e[0] == "wait" for e in cuda.log)


def test_full_device_refuses_capture_with_oom_and_repairs(fake_cuda, monkeypatch):
    cuda = fake_cuda(1.0, mem_used=0.995)
    repaired = []
    monkeypatch.setattr(timer, "repair_after_failed_capture", lambda: repaired.append(True))
    with pytest.raises(torch.cuda.OutOfMemoryError):
        timer.time_cuda_graph(cuda.step)
    assert repaired == [True]
    assert not any(e[0] == "capture" for e in cuda.log)


def test_is_oom_recognises_the_usual_messages():
    assert timer.is_oom(torch.cuda.OutOfMemoryError("x"))
    assert timer.is_oom(RuntimeError("CUDA error: out of memory"))
    assert timer.is_oom(RuntimeError("CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"))
    assert not timer.is_oom(RuntimeError("CUDNN_STATUS_NOT_SUPPORTED"))
    assert not timer.is_oom(ValueError("out of memory"))
