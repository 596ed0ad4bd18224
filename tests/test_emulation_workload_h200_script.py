"""The prepared H200 device script: its CPU paths (--dry-run, --cpu-smoke, budget) and a guard
that it never reaches for device-state-changing controls."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from traintime.emulation.schema import HOST_LATENCY

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device" / "emulation_h200.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("emulation_h200", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_never_touches_clocks_mps_or_power():
    code = SCRIPT.read_text()
    for forbidden in ("SetGpuLockedClocks", "ResetGpuLockedClocks", "nvmlDeviceSet", "MPSBackend",
                      "NvmlClockBackend", "make_backend", "CUDA_MPS", "nvidia-smi", "PowerManagementLimit",
                      "nvidia-cuda-mps-control"):
        assert forbidden not in code, forbidden


def test_dry_run_plans_h200_partitions(script, capsys):
    assert script.main(["--dry-run", "--out", "unused"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(re.search(r"plan \(assuming an H200.*?\): (\{.*\})", out).group(1))
    assert plan["green_partitions"] == [16, 32, 64, 96, 128]
    assert plan["models"] == script.MODELS and plan["imgs"] == [224, 128, 64] and plan["batch"] == 16
    assert plan["points"] == 5 * 3 * 6


def test_cpu_smoke_writes_valid_labelled_outputs(script, tmp_path):
    out, ref = tmp_path / "out", tmp_path / "ref"
    assert script.main(["--cpu-smoke", "--out", str(out), "--reference-dir", str(ref)]) == 0
    names = {"emulation_h200_host_latency.csv", "emulation_h200_latency_vs_sms.png", "emulation_h200_run.json"}
    assert {p.name for p in out.iterdir()} == names
    assert not ref.exists()  # synthetic smoke rows never reach a measurement folder
    df = HOST_LATENCY.validate(pd.read_csv(out / "emulation_h200_host_latency.csv"))
    assert len(df) == 3 and set(df["backend"]) == {"none", "green_ctx"}
    assert df["synthetic"].all() and set(df["host_gpu"]) == {"cpu"} and set(df["device_name"]) == {"cpu"}
    assert (df["status"] == "ok").all() and (df["latency_ms"] > 0).all()
    assert sorted(df["effective_sms"].dropna().astype(int)) == [16, 64]
    assert df["note"].str.contains("nothing restricted").all()
    # the simulated partitions were not checked: their rows say so in the raw file
    assert set(df.loc[df["backend"] == "green_ctx", "check"]) == {"skipped"}
    assert set(df.loc[df["backend"] == "none", "check"]) == {"not_needed"}
    run = json.loads((out / "emulation_h200_run.json").read_text())
    assert run["complete"] is True and run["rows"] == {"ok": 3} and run["skipped"] == []
    assert any("synthetic" in w for w in run["warnings"])


def test_budget_exhausted_skips_points_but_still_reports(script, tmp_path):
    assert script.main(["--cpu-smoke", "--out", str(tmp_path), "--reference-dir", "", "--budget-s", "0"]) == 0
    run = json.loads((tmp_path / "emulation_h200_run.json").read_text())
    assert run["skipped"] == ["test_vit 32px b2"] and "no rows measured" in run["warnings"]
    assert not (tmp_path / "emulation_h200_host_latency.csv").exists()


class _Stream:
    def __init__(self, dev, name, sms):
        self.dev, self.name, self.sms = dev, name, sms

    def synchronize(self):
        pass


class _FakeDevice:
    """Work on a stream of k SMs costs 1 ms x 132 / k (or 1 ms everywhere when not binding)."""

    def __init__(self, binds=True):
        self.t, self.binds, self.current, self.capturing = 0.0, binds, None, None

    def cost(self, stream):
        return 132.0 / stream.sms if self.binds else 1.0


@pytest.fixture()
def fake_device(monkeypatch):
    import contextlib

    import torch

    def install(binds=True):
        dev = _FakeDevice(binds)
        full = _Stream(dev, "full", 132)
        dev.current = full
        real_randn, real_mm = torch.randn, torch.mm

        def mm(a, b):
            if dev.capturing is not None:
                dev.capturing.append(dev.current)
            else:
                dev.t += dev.cost(dev.current)
            return real_mm(a, b)

        class Graph:
            def __init__(self):
                self.kernels = []

            def replay(self):
                dev.t += sum(dev.cost(s) for s in self.kernels)  # kernels keep their capture stream

        @contextlib.contextmanager
        def stream(s):
            prev, dev.current = dev.current, s
            try:
                yield
            finally:
                dev.current = prev

        @contextlib.contextmanager
        def graph(g, stream=None):
            prev, dev.current, dev.capturing = dev.current, stream, g.kernels
            try:
                yield
            finally:
                dev.current, dev.capturing = prev, None

        class Event:
            def __init__(self, enable_timing=False):
                self.at = None

            def record(self):
                self.at = dev.t

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return end.at - self.at

        monkeypatch.setattr(torch, "randn", lambda *shape, device=None, **kw: real_randn(*shape, **kw))
        monkeypatch.setattr(torch, "mm", mm)
        for name, value in {"Stream": lambda: _Stream(dev, "side", 132), "stream": stream, "graph": graph,
                            "CUDAGraph": Graph, "Event": Event, "synchronize": lambda: None}.items():
            monkeypatch.setattr(torch.cuda, name, value)
        return dev

    return install


@pytest.mark.parametrize("binds", [True, False])
def test_green_check_measures_the_slowdown(script, fake_device, binds):
    from traintime.emulation.green_ctx import GreenContextBackend, GreenHandle

    dev = fake_device(binds)
    backend = GreenContextBackend(host_sms=132, compute_capability="9.0",
                                  factory=lambda n, i: GreenHandle(None, lambda: _Stream(dev, f"g{n}", n), n, "fake"))
    full, g16, g64 = script.green_check(backend, [16, 64], 132, n=8, reps=3)
    assert [r["status"] for r in (full, g16, g64)] == ["ok"] * 3, (full, g16, g64)
    assert full["eager_ms"] == pytest.approx(1.0) and full["graph_ms"] == pytest.approx(1.0)
    assert g16["effective_sms"] == 16 and g16["ideal_slowdown"] == pytest.approx(132 / 16)
    expected = 132 / 16 if binds else 1.0
    assert g16["eager_slowdown"] == pytest.approx(expected) and g16["graph_slowdown"] == pytest.approx(expected)
    assert g16["restriction_binds_graph"] is binds and g64["restriction_binds_eager"] is binds


def test_a_partition_that_cannot_be_created_gives_error_rows_once(script, tmp_path, monkeypatch):
    from traintime.core.errors import DeviceStateError
    from traintime.emulation import green_ctx

    calls = []

    def refuse(n, i):
        calls.append(n)
        raise DeviceStateError(f"green_ctx: cannot create a green context of {n} SMs: test")

    real = green_ctx.GreenContextBackend

    def patched(host_sms=None, compute_capability=None, factory=None, device_index=0):
        return real(host_sms=host_sms, compute_capability=compute_capability, factory=refuse)

    monkeypatch.setattr(script, "GreenContextBackend", patched)
    assert script.main(["--cpu-smoke", "--out", str(tmp_path), "--reference-dir", "", "--imgs", "32", "48",
                        "--models", "test_vit", "--sms", "16", "--batch", "2", "--replays", "1"]) == 0
    df = pd.read_csv(tmp_path / "emulation_h200_host_latency.csv")
    green = df[df["backend"] == "green_ctx"]
    assert len(green) == 2 and (green["status"] == "error").all()
    assert green["note"].str.contains("cannot create a green context of 16 SMs").all()
    assert calls == [16]  # not retried for the second workload
    assert (df[df["backend"] == "none"]["status"] == "ok").all()


def test_reference_copy_keeps_only_rows_whose_check_passed(script, tmp_path):
    base = dict(host_gpu="H200-SXM", model="resnet50", img_px=64, batch_size=16, precision="fp32",
                requested_clock_mhz=None, effective_clock_mhz=None, latency_ms=1.0, oom=False, iters_per_replay=2,
                replays=10, torch_version="x", device_name="x", status="ok", note=None, synthetic=False)
    rows = [dict(base, backend="none", requested_sm_pct=100.0, effective_sms=132),
            dict(base, backend="green_ctx", requested_sm_pct=48.4848, effective_sms=64, check="failed"),
            dict(base, backend="green_ctx", requested_sm_pct=24.2424, effective_sms=32)]
    raw = tmp_path / "raw.csv"
    pd.DataFrame(rows).to_csv(raw, index=False)
    run: dict = {}
    script.write_trusted_reference(raw, tmp_path / "ref.csv", run)
    ref = pd.read_csv(tmp_path / "ref.csv")
    assert sorted(ref["requested_sm_pct"]) == [24.2424, 100.0]  # the failed-check row did not land
    assert run["reference_rows_excluded"] == {"failed": 1}
    assert len(pd.read_csv(raw)) == 3  # the raw file keeps every row
