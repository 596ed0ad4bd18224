"""The paper's workload and the CPU fallback timer on a tiny timm model; OOM and unknown names."""

from __future__ import annotations

import pytest
import torch

from traintime.core.errors import ConfigError, UnknownNameError
from traintime.emulation.restriction import Applied
from traintime.emulation.schema import HOST_LATENCY
from traintime.emulation.sweep import rows_to_frame
from traintime.emulation.timer import (
    CPU_TIMER_NOTE,
    Timing,
    measure_step,
    measure_workload,
)
from traintime.emulation.workload import (
    TrainStep,
    WorkloadSpec,
    build_model,
    make_workload,
)

TINY = WorkloadSpec("test_vit", 32, 2, "fp32")


def test_cpu_measurement_gives_a_valid_positive_row():
    row = measure_workload(TINY, host_gpu="cpu", replays=3)
    assert set(row) == set(HOST_LATENCY.names)
    assert row["status"] == "ok" and row["oom"] is False
    assert row["latency_ms"] > 0
    assert row["iters_per_replay"] >= 2 and row["replays"] == 3
    assert row["device_name"] == "cpu" and CPU_TIMER_NOTE in row["note"]
    assert row["backend"] == "none" and row["requested_sm_pct"] == 100.0
    df = rows_to_frame([row])
    assert df.loc[0, "model"] == "test_vit" and df.loc[0, "img_px"] == 32


def test_workload_follows_the_paper():
    torch.manual_seed(1)
    step = make_workload(WorkloadSpec("test_resnet", 32, 3, "fp32"))
    assert step.x.shape == (3, 3, 32, 32) and step.y.shape == (3,)
    assert int(step.y.min()) >= 0 and int(step.y.max()) < 16
    assert step.model.training
    group = step.optimizer.param_groups[0]
    assert isinstance(step.optimizer, torch.optim.SGD) and group["lr"] == 0.01 and group["momentum"] == 0.9
    assert isinstance(step.criterion, torch.nn.CrossEntropyLoss)
    out = step.model(step.x)
    assert out.shape == (3, 16)
    w0 = [p.detach().clone() for p in step.model.parameters()]
    step()
    step()
    assert any(not torch.equal(a, b) for a, b in zip(w0, step.model.parameters()))
    # zero_grad(set_to_none=False): gradient buffers stay allocated (fixed addresses for graphs)
    ptrs = [p.grad.data_ptr() for p in step.model.parameters() if p.grad is not None]
    step.optimizer.zero_grad(set_to_none=False)
    assert all(p.grad is not None for p in step.model.parameters() if p.requires_grad)
    assert [p.grad.data_ptr() for p in step.model.parameters() if p.grad is not None] == ptrs
    assert all(float(p.grad.abs().sum()) == 0 for p in step.model.parameters() if p.grad is not None)
    # the batch is fixed: a step does not redraw it
    x0 = step.x.clone()
    step()
    assert torch.equal(step.x, x0)


@pytest.mark.parametrize("precision, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16)])
def test_autocast_only_for_reduced_precision(precision, dtype):
    step = make_workload(WorkloadSpec("test_vit", 32, 2, precision))
    seen = []
    handle = step.model.head.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    step()
    handle.remove()
    assert seen == [dtype]


def test_img_size_fallback_when_the_model_rejects_it(monkeypatch):
    import timm

    calls = []
    real = timm.create_model

    def fake_create(name, **kw):
        calls.append(dict(kw))
        if "img_size" in kw:
            raise TypeError("__init__() got an unexpected keyword argument 'img_size'")
        return real("test_resnet", **kw)

    monkeypatch.setattr(timm, "create_model", fake_create)
    build_model("test_resnet", 48)
    assert calls == [{"pretrained": False, "num_classes": 16, "img_size": 48},
                     {"pretrained": False, "num_classes": 16}]


def test_img_size_is_passed_when_accepted():
    m = build_model("test_vit", 48)
    assert m.patch_embed.img_size == (48, 48)


def test_unknown_model_name_lists_close_matches():
    with pytest.raises(UnknownNameError, match=r"unknown timm model 'resnet_18'; did you mean: .*resnet18"):
        make_workload(WorkloadSpec("resnet_18", 32, 2))
    # a user error, raised before any measurement, not turned into a row
    with pytest.raises(UnknownNameError):
        measure_workload(WorkloadSpec("not_a_model_xyz", 32, 2), host_gpu="cpu")


def test_bad_precision_is_a_config_error():
    with pytest.raises(ConfigError, match="precision 'fp8'"):
        WorkloadSpec("test_vit", 32, 2, "fp8")


class _OOMStep:
    def __init__(self) -> None:
        self.released = False

    def __call__(self) -> None:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def release(self) -> None:
        self.released = True


def test_oom_during_timing_becomes_an_oom_row():
    step = _OOMStep()
    row = measure_workload(TINY, host_gpu="cpu", replays=2, synthetic=True,
                           workload_factory=lambda s, d: step)
    assert row["oom"] is True and row["status"] == "oom" and row["latency_ms"] is None
    assert step.released  # memory released after the failure
    df = rows_to_frame([row])
    assert bool(df.loc[0, "oom"]) and bool(df.loc[0, "synthetic"])


def test_oom_while_building_becomes_an_oom_row():
    def factory(spec, device):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    row = measure_workload(TINY, host_gpu="cpu", workload_factory=factory)
    assert row["status"] == "oom" and row["oom"] is True


def test_other_failures_become_error_rows_not_crashes():
    def boom() -> None:
        raise RuntimeError("cuDNN error: CUDNN_STATUS_NOT_SUPPORTED")

    row = measure_step(boom, TINY, host_gpu="cpu")
    assert row["status"] == "error" and row["oom"] is False and "CUDNN_STATUS_NOT_SUPPORTED" in row["note"]
    rows_to_frame([row])


def test_latency_scale_of_the_analytic_clock_is_applied(monkeypatch):
    from traintime.emulation import timer

    monkeypatch.setattr(timer, "time_step", lambda *a, **k: Timing(1.5, 4, 10, "cuda_graph"))
    applied = Applied(backend="analytic_clock", requested_clock_mhz=1200.0, latency_scale=2.0,
                      notes=["analytic clock correction"])
    row = measure_step(lambda: None, TINY, host_gpu="cpu", applied=applied)
    assert row["latency_ms"] == pytest.approx(3.0)
    assert "measured_ms=1.5" in row["note"] and "analytic clock correction" in row["note"]
    assert row["backend"] == "analytic_clock" and row["requested_clock_mhz"] == 1200.0


def test_release_drops_tensors():
    step = TrainStep(TINY)
    step.release()
    assert not hasattr(step, "model") and not hasattr(step, "x")
