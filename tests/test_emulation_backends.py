"""Restriction backends driven by fakes: restore on exceptions and signals, permissions, rounding.

The fakes (NVML module, MPS control runner, green-context factory) record every call; the
signal tests run a backend in a real child process, deliver SIGTERM/SIGINT, and read the call
log the child's fake wrote to a file. This module imports no torch at import time so that the
child processes start quickly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from traintime.core.errors import ConfigError, DeviceStateError
from traintime.emulation.backends import (
    ANALYTIC_NOTE,
    AnalyticClockBackend,
    CombinedBackend,
    make_backend,
)
from traintime.emulation.green_ctx import (
    GreenContextBackend,
    GreenHandle,
    green_ctx_granularity,
    round_green_sms,
)
from traintime.emulation.mps import MPSBackend
from traintime.emulation.nvml_clock import NvmlClockBackend, nearest_clock
from traintime.emulation.restriction import (
    Applied,
    NoRestriction,
    RestoreOnSignal,
    Setting,
)

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"


# --- fakes ----------------------------------------------------------------------------------


class FakeNVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class FakeNvml:
    """A pynvml stand-in recording calls (optionally appending them to a file, flushed)."""

    NVMLError = FakeNVMLError
    NVML_ERROR_NOT_SUPPORTED = 3
    NVML_ERROR_NO_PERMISSION = 4
    NVML_CLOCK_SM = 1
    GRAPHICS = {9501.0: [2400.0, 2100.0, 1800.0, 1500.0, 1200.0], 810.0: [1000.0, 600.0]}

    def __init__(self, log_path: str | None = None, deny: bool = False, unsupported: bool = False,
                 max_clock: float = 2400.0) -> None:
        self.calls: list[tuple] = []
        self.log_path = log_path
        self.deny = deny
        self.unsupported = unsupported
        self.max_clock = max_clock
        self.locked: float | None = None

    def _log(self, *call: object) -> None:
        self.calls.append(call)
        if self.log_path:
            with open(self.log_path, "a") as fh:
                fh.write(" ".join(map(str, call)) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    def nvmlInit(self) -> None:
        self._log("init")

    def nvmlShutdown(self) -> None:
        self._log("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetName(self, h: str) -> str:
        return "NVIDIA GeForce RTX 5090"

    def nvmlSystemGetDriverVersion(self) -> str:
        return "999.1"

    def nvmlDeviceGetSupportedMemoryClocks(self, h: str) -> list[float]:
        return list(self.GRAPHICS)

    def nvmlDeviceGetSupportedGraphicsClocks(self, h: str, mem: int) -> list[float]:
        self._log("graphics_clocks", mem)
        return self.GRAPHICS[float(mem)]

    def nvmlDeviceSetGpuLockedClocks(self, h: str, lo: int, hi: int) -> None:
        if self.deny:
            raise FakeNVMLError(self.NVML_ERROR_NO_PERMISSION)
        if self.unsupported:
            raise FakeNVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        self.locked = float(hi)
        self._log("lock", h, lo, hi)

    def nvmlDeviceResetGpuLockedClocks(self, h: str) -> None:
        self.locked = None
        self._log("reset", h)

    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> float:
        return self.locked if self.locked is not None else self.max_clock

    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> float:
        return self.max_clock


class FakeMpsRunner:
    """Records MPS control commands instead of running them (optionally into a file)."""

    def __init__(self, log_path: str | None = None, missing: bool = False) -> None:
        self.calls: list[tuple[list[str], dict[str, str], str | None]] = []
        self.log_path = log_path
        self.missing = missing

    def __call__(self, argv, env, stdin=None) -> None:
        if self.missing:
            raise FileNotFoundError(argv[0])
        pipe = env.get("CUDA_MPS_PIPE_DIRECTORY")
        self.calls.append((list(argv), {"pipe": pipe, "log": env.get("CUDA_MPS_LOG_DIRECTORY")}, stdin))
        if self.log_path:
            what = "start" if "-d" in argv else ("quit" if stdin and stdin.strip() == "quit" else "other")
            with open(self.log_path, "a") as fh:
                fh.write(f"{what} {pipe}\n")
                fh.flush()
                os.fsync(fh.fileno())

    @property
    def actions(self) -> list[str]:
        return ["start" if "-d" in a else ("quit" if s and s.strip() == "quit" else "other")
                for a, _e, s in self.calls]


class FakeGreen:
    """Green-context factory: records requested SM counts, hands out fake streams."""

    def __init__(self, read_back: int | None = None) -> None:
        self.requested: list[int] = []
        self.closed = 0
        self.streams = 0
        self.read_back = read_back

    def __call__(self, n: int, index: int) -> GreenHandle:
        self.requested.append(n)
        fake = self

        def stream() -> str:
            fake.streams += 1
            return f"green-stream-{fake.streams}"

        class Handle(GreenHandle):
            def close(self_inner) -> None:
                fake.closed += 1
                super().close()

        return Handle(object(), stream, self.read_back if self.read_back is not None else n, "fake")


# --- NVML clock locking ---------------------------------------------------------------------


def test_nvml_locks_nearest_supported_clock_at_max_memory_clock_and_resets():
    nv = FakeNvml()
    b = NvmlClockBackend(nvml=nv)
    with b.apply(Setting(clock_mhz=1620)) as ap:
        assert nv.locked == 1500.0  # 1500 is 120 MHz away, 1800 is 180
        assert ap.backend == "nvml_clock"
        assert ap.effective_clock_mhz == 1500.0 and ap.requested_clock_mhz == 1620.0
        assert ap.clock_reader() == 1500.0
    assert ("graphics_clocks", 9501) in nv.calls
    assert ("lock", "h0", 1500, 1500) in nv.calls
    assert nv.calls[-1] == ("reset", "h0") and nv.locked is None


def test_nvml_restores_after_exception_inside_block():
    nv = FakeNvml()
    with pytest.raises(ZeroDivisionError):
        with NvmlClockBackend(nvml=nv).apply(Setting(clock_mhz=2100)):
            1 / 0
    names = [c[0] for c in nv.calls]
    assert names.index("lock") < names.index("reset")
    assert nv.locked is None


def test_nvml_reset_is_idempotent():
    nv = FakeNvml()
    b = NvmlClockBackend(nvml=nv)
    with b.apply(Setting(clock_mhz=1800)):
        b.reset()  # e.g. a signal handler restored already
    b.close()
    assert [c[0] for c in nv.calls].count("reset") == 1


def test_nvml_without_permission_refuses_clearly():
    nv = FakeNvml(deny=True)
    with pytest.raises(DeviceStateError, match=r"needs root.*NO_PERMISSION.*analytic_clock"):
        with NvmlClockBackend(nvml=nv).apply(Setting(clock_mhz=1800)):
            pytest.fail("the block must not run without a lock")
    assert not any(c[0] in ("lock", "reset") for c in nv.calls)


def test_nvml_not_supported_is_a_device_state_error():
    with pytest.raises(DeviceStateError, match="NOT_SUPPORTED"):
        with NvmlClockBackend(nvml=FakeNvml(unsupported=True)).apply(Setting(clock_mhz=1800)):
            pass


def test_nvml_without_clock_request_touches_nothing():
    nv = FakeNvml()
    with NvmlClockBackend(nvml=nv).apply(Setting()) as ap:
        assert ap.backend == "none"
    assert nv.calls == []


def test_nearest_clock_ties_go_low():
    assert nearest_clock([1500, 1800], 1650) == 1500
    assert nearest_clock([1500, 1800], 1651) == 1800
    with pytest.raises(DeviceStateError):
        nearest_clock([], 1000)


def test_signal_handlers_are_restored_after_the_block():
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with NvmlClockBackend(nvml=FakeNvml()).apply(Setting(clock_mhz=1800)):
        assert signal.getsignal(signal.SIGTERM) is not before[signal.SIGTERM]
    assert {s: signal.getsignal(s) for s in before} == before


def test_restore_on_signal_calls_previous_python_handler():
    seen: list[str] = []
    prev = signal.signal(signal.SIGUSR1, lambda s, f: seen.append("previous"))
    try:
        with RestoreOnSignal(lambda: seen.append("restore"), signals=(signal.SIGUSR1,)):
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.05)
        assert seen == ["restore", "previous"]
    finally:
        signal.signal(signal.SIGUSR1, prev)


# --- signals in a child process -------------------------------------------------------------

_CHILD = textwrap.dedent("""
    import signal, sys, time
    # a child of a background shell job inherits SIGINT ignored; a user's Ctrl-C is not ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path[:0] = [{tests!r}, {src!r}]
    from test_emulation_backends import FakeNvml, FakeMpsRunner
    from traintime.emulation.nvml_clock import NvmlClockBackend
    from traintime.emulation.mps import MPSBackend
    from traintime.emulation.restriction import Setting
    from traintime.emulation.backends import CombinedBackend
    which = {which!r}
    if which == "nvml":
        backend = NvmlClockBackend(nvml=FakeNvml(log_path={log!r}))
        setting = Setting(clock_mhz=1800)
    else:
        backend = CombinedBackend(MPSBackend(runner=FakeMpsRunner(log_path={log!r})),
                                  NvmlClockBackend(nvml=FakeNvml(log_path={log!r})))
        setting = Setting(sm_pct=40, clock_mhz=1500)
    with backend:
        with backend.apply(setting):
            open({ready!r}, "w").write("ready")
            time.sleep(60)
    print("not reached")
""")


def _run_child_and_signal(tmp_path: Path, which: str, sig: int) -> tuple[int, list[str], str]:
    log, ready = tmp_path / "calls.log", tmp_path / "ready"
    code = _CHILD.format(tests=str(TESTS), src=str(SRC), which=which, log=str(log), ready=str(ready))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 40
    while not ready.exists():
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"child did not get ready: {err[-2000:]}")
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=180)  # generous: a loaded CI machine starts Python slowly
    lines = log.read_text().splitlines() if log.exists() else []
    return proc.returncode, lines, out + err


# SIGTERM: SystemExit(128 + 15); SIGINT: KeyboardInterrupt, which Python turns into death by SIGINT
@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 128 + signal.SIGTERM), (signal.SIGINT, -signal.SIGINT)])
def test_child_restores_clock_on_signal(tmp_path, sig, code):
    rc, lines, output = _run_child_and_signal(tmp_path, "nvml", sig)
    assert rc == code, output
    locks = [line for line in lines if line.startswith("lock")]
    resets = [line for line in lines if line.startswith("reset")]
    assert locks == ["lock h0 1800 1800"]
    assert len(resets) == 1 and lines.index(resets[0]) > lines.index(locks[0])
    assert "not reached" not in output


def test_child_with_mps_and_clock_restores_both_on_sigterm(tmp_path):
    rc, lines, output = _run_child_and_signal(tmp_path, "combined", signal.SIGTERM)
    assert rc == 128 + signal.SIGTERM, output
    kinds = [line.split()[0] for line in lines if line.split()[0] in ("start", "quit", "lock", "reset")]
    # daemon first, then the clock; restored in reverse order, each exactly once
    assert kinds == ["start", "lock", "reset", "quit"], lines
    start_pipe = next(line.split()[1] for line in lines if line.startswith("start"))
    quit_pipe = next(line.split()[1] for line in lines if line.startswith("quit"))
    assert start_pipe == quit_pipe  # quit reached the daemon that was started
    assert not Path(start_pipe).exists()  # private folders removed


# --- MPS ------------------------------------------------------------------------------------


def test_mps_sets_percentage_env_and_private_writable_dirs():
    runner = FakeMpsRunner()
    b = MPSBackend(runner=runner)
    with b.apply(Setting(sm_pct=33.4)) as ap:
        assert ap.backend == "mps" and ap.needs_subprocess
        assert ap.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "33"
        for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            d = Path(ap.env[key])
            assert d.is_dir() and os.access(d, os.W_OK)
        pipe = ap.env["CUDA_MPS_PIPE_DIRECTORY"]
        assert ap.requested_sm_pct == 33.4
    assert runner.actions == ["start", "quit"]
    (start_argv, start_env, _), (quit_argv, quit_env, quit_in) = runner.calls
    assert start_argv == ["nvidia-cuda-mps-control", "-d"] and quit_argv == ["nvidia-cuda-mps-control"]
    assert quit_in.strip() == "quit" and start_env["pipe"] == quit_env["pipe"] == pipe
    assert not Path(pipe).exists()


def test_mps_session_starts_one_daemon_for_many_settings():
    runner = FakeMpsRunner()
    b = MPSBackend(runner=runner)
    pcts = []
    with b:
        for p in (100, 50, 12.5):
            with b.apply(Setting(sm_pct=p)) as ap:
                pcts.append(ap.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"])
        assert b.running
    assert pcts == ["100", "50", "13"]
    assert runner.actions == ["start", "quit"] and not b.running


def test_mps_stops_daemon_after_exception():
    runner = FakeMpsRunner()
    with pytest.raises(RuntimeError, match="boom"):
        with MPSBackend(runner=runner).apply(Setting(sm_pct=50)):
            raise RuntimeError("boom")
    assert runner.actions == ["start", "quit"]


def test_mps_missing_control_binary_is_a_clear_error():
    with pytest.raises(DeviceStateError, match="nvidia-cuda-mps-control.*not found"):
        with MPSBackend(runner=FakeMpsRunner(missing=True)).apply(Setting(sm_pct=50)):
            pass
    # the real runner too (no such program on a CPU machine / in CI)
    with pytest.raises(DeviceStateError, match="not found"):
        with MPSBackend(control="traintime-no-such-mps-control").apply(Setting(sm_pct=50)):
            pass


def test_mps_rejects_sm_counts():
    with pytest.raises(ConfigError, match="percentage"):
        with MPSBackend(runner=FakeMpsRunner()).apply(Setting(sms=16)):
            pass


def test_mps_thread_percentage_bounds():
    assert MPSBackend.thread_percentage(0.2) == 1
    assert MPSBackend.thread_percentage(99.5) == 100
    assert MPSBackend.thread_percentage(17.6) == 18


# --- green contexts -------------------------------------------------------------------------


@pytest.mark.parametrize("cc, total, requested, expected", [
    ("8.6", 82, 3, 4), ("8.6", 82, 5, 6), ("8.6", 82, 33, 34), ("8.9", 128, 24, 24),
    ("9.0", 132, 16, 16), ("9.0", 132, 20, 24), ("9.0", 132, 19, 16), ("9.0", 132, 3, 8),
    ("9.0", 132, 131, 128), ("9.0", 132, 132, 132), ("9.0", 132, 500, 132), ("12.0", 170, 66, 64),
])
def test_green_rounding(cc, total, requested, expected):
    assert round_green_sms(requested, total, cc) == expected


def test_green_granularity_by_compute_capability():
    assert green_ctx_granularity("8.0") == (4, 2)
    assert green_ctx_granularity((9, 0)) == (8, 8)
    assert green_ctx_granularity("12.0") == (8, 8)
    with pytest.raises(DeviceStateError, match="8.0 or newer"):
        green_ctx_granularity("7.5")


def test_green_partition_is_rounded_read_back_and_released():
    fake = FakeGreen(read_back=14)  # the driver may grant fewer SMs than asked: read back wins
    b = GreenContextBackend(host_sms=132, compute_capability="9.0", factory=fake)
    with b.apply(Setting(sms=18)) as ap:
        assert fake.requested == [16]
        assert ap.backend == "green_ctx" and ap.effective_sms == 14
        assert ap.requested_sm_pct == round(100 * 18 / 132, 4)
        assert ap.stream_factory() == "green-stream-1"
        assert "partition_sms=16" in ap.note and "fake" in ap.note
    assert fake.closed == 1


def test_green_released_after_exception_and_pct_requests():
    fake = FakeGreen()
    b = GreenContextBackend(host_sms=82, compute_capability="8.6", factory=fake)
    with pytest.raises(KeyError):
        with b.apply(Setting(sm_pct=25)) as ap:
            assert fake.requested == [20]  # 25% of 82 = 20.5 -> 20
            raise KeyError("x")
    assert fake.closed == 1


def test_green_full_device_creates_no_context():
    fake = FakeGreen()
    with GreenContextBackend(host_sms=132, compute_capability="9.0", factory=fake).apply(Setting(sms=132)) as ap:
        assert ap.stream_factory is None and ap.effective_sms == 132
    assert fake.requested == []


# --- analytic clock, combination, factory ---------------------------------------------------


def test_analytic_clock_scales_and_labels():
    with AnalyticClockBackend(host_clock_mhz=2400).apply(Setting(clock_mhz=1800)) as ap:
        assert ap.backend == "analytic_clock"
        assert ap.latency_scale == pytest.approx(2400 / 1800)
        assert ANALYTIC_NOTE in ap.note and "not the paper" in ap.note


def test_analytic_clock_reads_host_clock_from_nvml():
    b = AnalyticClockBackend(nvml=FakeNvml(max_clock=2000))
    with b.apply(Setting(clock_mhz=1000)) as ap:
        assert ap.latency_scale == pytest.approx(2.0)


def test_combined_labels_and_merges():
    fake = FakeGreen()
    b = CombinedBackend(GreenContextBackend(host_sms=132, compute_capability="9.0", factory=fake),
                        AnalyticClockBackend(host_clock_mhz=1980))
    with b, b.apply(Setting(sms=32, clock_mhz=1500)) as ap:
        assert ap.backend == "analytic_clock"  # approximation wins the label
        assert "sm_backend=green_ctx" in ap.note and ap.effective_sms == 32
        assert ap.requested_clock_mhz == 1500 and ap.latency_scale == pytest.approx(1980 / 1500)
    nv, runner = FakeNvml(), FakeMpsRunner()
    b2 = CombinedBackend(MPSBackend(runner=runner), NvmlClockBackend(nvml=nv))
    with b2, b2.apply(Setting(sm_pct=50, clock_mhz=2000)) as ap:
        assert ap.backend == "mps" and ap.needs_subprocess
        assert ap.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50" and ap.effective_clock_mhz == 2100
    assert runner.actions == ["start", "quit"] and nv.locked is None
    b3 = CombinedBackend(NoRestriction("sm"), NvmlClockBackend(nvml=FakeNvml()))
    with b3.apply(Setting(clock_mhz=1200)) as ap:
        assert ap.backend == "nvml_clock"


def test_none_backend_refuses_restrictions():
    with pytest.raises(ConfigError, match="cannot restrict SMs"):
        with NoRestriction().apply(Setting(sm_pct=50)):
            pass
    with pytest.raises(ConfigError, match="cannot set a clock"):
        with make_backend("green_ctx", "none", green_factory=FakeGreen()).apply(Setting(clock_mhz=1000)):
            pass
    with NoRestriction().apply(Setting()) as ap:
        assert ap == Applied(backend="none")


def test_make_backend_rejects_unknown_names():
    with pytest.raises(ConfigError, match="'mig' is not one of"):
        make_backend("mig", "none")
    with pytest.raises(ConfigError, match="clock_backend"):
        make_backend("none", "overclock")


def test_setting_validation():
    with pytest.raises(ConfigError):
        Setting(sm_pct=0)
    with pytest.raises(ConfigError):
        Setting(clock_mhz=-5)
    assert Setting(sms=33).requested_pct(132) == 25.0
