"""Benchmark protocol: timings, OOM and NaN-loss rows, device columns on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from traintime.core.errors import DeviceStateError, TrainingError, UnknownNameError
from traintime.measure.timing import (
    BenchmarkJob,
    benchmark_step,
    build_optimizer,
    device_columns,
    is_oom,
    resolve_device,
    run_benchmark,
)


def _loader(n: int = 64, batch: int = 8):
    ds = torch.utils.data.TensorDataset(torch.randn(n, 3, 8, 8), torch.randint(0, 4, (n,)))
    return torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True)


def _tiny() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(192, 4))


def test_benchmark_step_counts_measured_iterations_and_sums_times() -> None:
    m = _tiny()
    res = benchmark_step(m, _loader(), build_optimizer("sgd", m.parameters(), 0.01), torch.device("cpu"),
                         warmup=2, measured=7)
    assert res.step_ms.shape == (7,)
    assert res.step_ms == pytest.approx(res.loader_ms + res.compute_ms)
    s = res.summary()
    assert s["p90_step_time_ms"] >= s["p50_step_time_ms"] > 0
    assert s["step_time_ms"] == pytest.approx(s["loader_wait_ms"] + s["compute_time_ms"])


class _NanModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(192, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x.flatten(1)) * float("nan")


def test_nan_loss_raises_training_error() -> None:
    m = _NanModel()
    with pytest.raises(TrainingError, match="non-finite loss"):
        benchmark_step(m, _loader(), build_optimizer("sgd", m.parameters(), 0.01), torch.device("cpu"))


class _OomModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB (fake)")


def _patch_model(monkeypatch: pytest.MonkeyPatch, cls: type) -> None:
    import traintime.measure.models as w

    monkeypatch.setattr(w, "create_model", lambda *a, **k: cls())


def test_oom_becomes_an_oom_row(monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_model(monkeypatch, _OomModel)
    row = run_benchmark(BenchmarkJob("mixer", "synthetic", "sgd", 8, 32, img_px=8), device="cpu", num_workers=0,
                        warmup=1, measured=2, synthetic_size=32)
    assert row["status"] == "oom"
    assert "out of memory" in row["error_message"]
    assert row["step_time_ms"] is None
    assert row["synthetic"] is True and row["source"] == "local" and row["gpu"] == "cpu"


def test_nan_loss_becomes_an_error_row(monkeypatch: pytest.MonkeyPatch) -> None:
    class _Nan8(_NanModel):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3 * 8 * 8, 10)

    _patch_model(monkeypatch, _Nan8)
    row = run_benchmark(BenchmarkJob("mixer", "synthetic", "sgd", 8, 32, img_px=8), device="cpu", num_workers=0,
                        warmup=1, measured=2, synthetic_size=32)
    assert row["status"] == "error" and "non-finite loss" in row["error_message"]


def test_is_oom_recognises_messages() -> None:
    assert is_oom(torch.cuda.OutOfMemoryError("x"))
    assert is_oom(RuntimeError("CUDA out of memory. Tried to allocate"))
    assert not is_oom(RuntimeError("shape mismatch"))


def test_real_tiny_benchmark_row_on_cpu() -> None:
    row = run_benchmark(BenchmarkJob("mixer", "synthetic", "adamw", 8, 32, img_px=8,
                                     model_kwargs=(("embed_dim", 16), ("depth", 1))),
                        device="cpu", num_workers=0, warmup=1, measured=3, synthetic_size=32)
    assert row["status"] == "ok" and row["step_time_ms"] > 0
    assert row["model"] == "mixer" and row["family"] == "MLP" and row["optimizer"] == "AdamW"
    assert row["dataset"] == "synthetic" and row["synthetic"] is True
    assert row["optimizer_state_bytes"] == 2 * row["param_bytes"]
    assert row["device"] == "cpu" and row["fp32_gflops"] is None
    assert row["measured_at"] and row["torch_version"] == torch.__version__
    assert math.isfinite(row["final_loss"])


@pytest.mark.gpu
def test_real_tiny_benchmark_row_on_cuda() -> None:
    row = run_benchmark(BenchmarkJob("mixer", "synthetic", "adamw", 8, 32, img_px=8,
                                     model_kwargs=(("embed_dim", 16), ("depth", 1))),
                        device="cuda", num_workers=0, warmup=1, measured=3, synthetic_size=32)
    assert row["status"] == "ok" and row["step_time_ms"] > 0
    assert row["device"].startswith("cuda") and row["gpu"] != "cpu" and row["gpu_reported"]


def test_device_resolution_and_cpu_columns() -> None:
    assert resolve_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        assert resolve_device("auto").type == "cpu"
        with pytest.raises(DeviceStateError):
            resolve_device("cuda")
        with pytest.raises(DeviceStateError, match="expected to measure on GPU"):
            device_columns(torch.device("cpu"), expected_gpu="T4")
    cols = device_columns(torch.device("cpu"))
    assert cols["gpu"] == "cpu" and cols["sms"] is None and cols["price_per_hour_usd"] is None


def test_unknown_optimizer() -> None:
    with pytest.raises(UnknownNameError, match="did you mean: adam, adamw"):
        build_optimizer("adamx", _tiny().parameters(), 0.1)
