"""Host sweeps: grids, one row per point, MPS points in a child process, atomic sorted output."""

from __future__ import annotations

import pandas as pd
import pytest
from test_emulation_backends import FakeGreen, FakeMpsRunner

from traintime.core.errors import (
    ConfigError,
    DeviceStateError,
    SchemaError,
    UnknownNameError,
)
from traintime.emulation.backends import CombinedBackend, make_backend
from traintime.emulation.green_ctx import GreenContextBackend
from traintime.emulation.restriction import NoRestriction, Setting
from traintime.emulation.schema import HOST_LATENCY
from traintime.emulation.sweep import (
    rows_to_frame,
    run_child,
    run_mapped,
    run_points,
    run_sweep,
    settings_grid,
    workload_grid,
    write_rows,
)
from traintime.emulation.timer import empty_row
from traintime.emulation.workload import WorkloadSpec

W1 = WorkloadSpec("test_vit", 32, 2, "fp32")
W2 = WorkloadSpec("test_resnet", 64, 4, "bf16")


def fake_measure(log):
    def measure(spec, *, host_gpu, device, applied, replays, synthetic):
        log.append((spec.model, applied.backend, applied.requested_sm_pct, applied.requested_clock_mhz,
                    applied.stream_factory is not None))
        row = empty_row(spec, host_gpu, applied)
        row.update(latency_ms=1.0 + 0.01 * len(log), status="ok", iters_per_replay=2, replays=replays,
                   device_name="fake", synthetic=True, effective_sms=applied.effective_sms or 170)
        return row

    return measure


def test_settings_grid():
    grid = settings_grid([50, 100, 25], [1500, 2400])
    assert len(grid) == 6 and grid[0] == Setting(sm_pct=100, clock_mhz=2400)
    assert settings_grid([100], None) == [Setting(sm_pct=100.0, clock_mhz=None)]
    assert settings_grid([100], [None]) == [Setting(sm_pct=100.0)]
    with pytest.raises(ConfigError, match="p_grid"):
        settings_grid([], [1500])


def test_workload_grid_checks_names_first():
    assert len(workload_grid(["test_vit", "test_resnet"], [32, 64], [2], ["fp32", "bf16"])) == 8
    with pytest.raises(UnknownNameError, match="test_vitt"):
        workload_grid(["test_vit", "test_vitt"], [32], [2], ["fp32"])


def test_one_row_per_point_and_workload_in_process():
    log: list = []
    fake = FakeGreen()
    backend = CombinedBackend(GreenContextBackend(host_sms=170, compute_capability="12.0", factory=fake),
                              NoRestriction("clock"))
    rows = run_points([W1, W2], settings_grid([100, 25], None), backend, host_gpu="RTX-5090",
                      measure=fake_measure(log), synthetic=True)
    assert len(rows) == 4
    assert [x[0] for x in log] == ["test_vit", "test_resnet"] * 2
    # full device: no partition; 25% of 170 = 42.5 SMs -> 40 (multiples of 8 on CC 12.0)
    assert [x[4] for x in log] == [False, False, True, True] and fake.requested == [40]
    assert fake.closed == 1
    df = rows_to_frame(rows)
    assert set(df["backend"]) == {"green_ctx"} and sorted(df["requested_sm_pct"].unique()) == [25.0, 100.0]


def test_mps_points_run_in_a_child_that_sees_the_percentage():
    runner = FakeMpsRunner()
    backend = make_backend("mps", "none", runner=runner)
    rows = run_points([W1], [Setting(sm_pct=25)], backend, host_gpu="cpu", replays=2, synthetic=True)
    assert runner.actions == ["start", "quit"]
    (row,) = rows
    assert row["status"] == "ok", row["note"]
    assert row["backend"] == "mps" and row["requested_sm_pct"] == 25.0
    assert "child saw CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in row["note"]
    assert row["device_name"] == "cpu" and row["synthetic"] is True
    rows_to_frame(rows)


def test_a_dead_child_gives_error_rows(tmp_path):
    from traintime.emulation.restriction import Applied

    applied = Applied(backend="mps", requested_sm_pct=50.0, env={"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"},
                      needs_subprocess=True)
    rows = run_child([W1, W2], applied, "cpu", 2, python="/bin/false")
    assert [r["status"] for r in rows] == ["error", "error"]
    assert all("child process failed (exit status 1)" in r["note"] for r in rows)
    rows_to_frame(rows)


def test_write_rows_is_sorted_validated_and_byte_stable(tmp_path):
    log: list = []
    rows = run_points([W2, W1], settings_grid([100], None), NoRestriction(), host_gpu="RTX-5090",
                      measure=fake_measure(log))
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    write_rows(rows, a)
    write_rows(list(reversed(rows)), b)
    assert a.read_bytes() == b.read_bytes()
    df = pd.read_csv(a)
    assert list(df.columns) == HOST_LATENCY.names
    assert list(df["model"]) == ["test_resnet", "test_vit"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_invalid_rows_are_refused_before_writing(tmp_path):
    row = empty_row(W1, "RTX-5090")
    row.update(status="fine")
    with pytest.raises(SchemaError, match="status"):
        write_rows([row], tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(DeviceStateError, match="no rows"):
        rows_to_frame([])


def test_run_sweep_writes_nothing_when_a_point_fails(tmp_path):
    calls: list = []

    def measure(spec, **kw):
        calls.append(spec)
        if len(calls) == 2:  # the second of two points
            raise KeyboardInterrupt
        return fake_measure([])(spec, **kw)

    out = tmp_path / "sweep.csv"
    with pytest.raises(KeyboardInterrupt):
        run_sweep([W1, W2], [100], None, NoRestriction(), host_gpu="RTX-5090", out_path=out, measure=measure)
    assert not out.exists()


def test_run_mapped_uses_the_mapper_setting(tmp_path):
    log: list = []
    fake = FakeGreen()
    backend = make_backend("green_ctx", "analytic_clock", host_clock_mhz=2407, green_factory=fake)
    backend.sm._host_sms, backend.sm._cc = 170, "12.0"
    df = run_mapped("RTX-4060", [W1], backend, host_gpu="RTX-5090",
                    mapper=lambda host, target: Setting(sm_pct=100 * 24 / 170, clock_mhz=2460),
                    measure=fake_measure(log), out_path=tmp_path / "m.csv")
    assert fake.requested == [24]
    assert df.loc[0, "backend"] == "analytic_clock" and df.loc[0, "requested_clock_mhz"] == 2460
    assert df.loc[0, "note"].startswith("mapped_target=RTX-4060")
    assert (tmp_path / "m.csv").exists()


def test_spec_mapper_follows_the_paper_mapping():
    from traintime.emulation.sweep import spec_mapper

    # RTX 4060 (24 SMs, boost 2460 MHz) on an RTX 5090 host (170 SMs)
    s = spec_mapper(sm_backend="mps")("RTX-5090", "RTX 4060")
    assert s.sm_pct == 14.0 and s.clock_mhz == 2460.0  # round(100 * 24 / 170) = 14
    g = spec_mapper(sm_backend="green_ctx", supported_clocks=[2400, 2100, 1800])("RTX-5090", "RTX-4060")
    assert g.sms == 24 and g.clock_mhz == 2400.0
    assert spec_mapper(sm_backend="mps", restrict_clock=False)("RTX-5090", "RTX-4060").clock_mhz is None
    with pytest.raises(ConfigError, match="cannot be emulated"):
        spec_mapper()("RTX-4060", "RTX-5090")


def test_emulable_targets():
    from traintime.emulation.sweep import emulable_targets

    got = emulable_targets("RTX 4070 SUPER", ["NVIDIA_GeForce_RTX_4060", "RTX-4090", "RTX-4070-SUPER",
                                              "NVIDIA GeForce RTX 3060"])
    assert got == ["RTX-3060", "RTX-4060"]  # the 4090 (128 SMs) and the host itself are left out
    with pytest.raises(UnknownNameError):
        emulable_targets("RTX-5090", ["RTX 9999"])


def test_config_job_refuses_to_run_without_the_configured_gpu(tmp_path):
    import torch

    from traintime.emulation.sweep import host_sweep_job

    if torch.cuda.is_available():  # pragma: no cover - GPU machines only
        pytest.skip("a CUDA device is present")
    cfg = {"models": ["test_vit"], "img_sizes": [32], "batch_sizes": [2], "precisions": ["fp32"],
           "host_gpu": "RTX-5090", "backend": "green_ctx", "clock_backend": "none", "host_clock_mhz": None,
           "p_grid": [100], "f_grid": [], "replays": 1, "child_timeout_s": 60}
    with pytest.raises(DeviceStateError, match="expected to measure on GPU 'RTX-5090'"):
        host_sweep_job(cfg, tmp_path / "s.csv")
    assert not (tmp_path / "s.csv").exists()
    with pytest.raises(UnknownNameError, match="test_vitt"):
        host_sweep_job({**cfg, "models": ["test_vitt"]}, tmp_path / "s.csv")
