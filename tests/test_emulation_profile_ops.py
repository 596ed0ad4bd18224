"""Per-op host profiles (traintime.emulation.profile_ops): a real CPU profile of a tiny timm model
(schema, FLOPs against torch's FlopCounterMode, the analytic baselines end to end), the bytes
model on hand-computed ops, time attribution on hand-made (fake) CUDA-style traces, the config job
and the H200 script's optional --profile-ops step (CPU smoke)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from traintime.core.errors import DeviceStateError
from traintime.core.io import read_csv, write_csv
from traintime.core.specs import gpu_row
from traintime.emulation.baselines import (
    OP_PROFILE,
    analytic_predictions,
    habitat_predict,
    neusight_predict,
)
from traintime.emulation.op_trace import PREFIX, attribute_trace
from traintime.emulation.profile_ops import (
    EXTRA_COLUMNS,
    OpRecord,
    host_ops_job,
    op_bytes,
    ops_frame,
    profile_ops,
    tensor_span_bytes,
)
from traintime.emulation.workload import WorkloadSpec, make_workload
from traintime.measure.device import DeviceInfo

aten = torch.ops.aten
SPEC = WorkloadSpec("test_resnet", 32, 2)


@pytest.fixture(scope="module")
def profiled():
    """One CPU profile of test_resnet (conv, batch norm, pooling, linear head) and torch's own
    FLOP count of one more step of the same workload."""
    from torch.utils.flop_counter import FlopCounterMode

    step = make_workload(SPEC, "cpu")
    df = profile_ops(SPEC, "cpu", "cpu", repeats=2, warmup=0, step=step)
    with FlopCounterMode(display=False) as fc:
        step()
    return df, fc.get_total_flops(), step


# --- a real CPU profile -------------------------------------------------------------------------


def test_cpu_rows_validate_and_are_labelled(profiled, tmp_path):
    df, _, _ = profiled
    OP_PROFILE.validate(df)
    write_csv(df, tmp_path / "ops.csv")
    back = OP_PROFILE.validate(read_csv(tmp_path / "ops.csv"))
    assert list(back.columns) == [*OP_PROFILE.names, *EXTRA_COLUMNS]
    assert set(df["device"]) == {"cpu"} and set(df["host_gpu"]) == {"cpu"}
    assert not df["synthetic"].any()  # a real (CPU) measurement, labelled by device, not a fake
    assert df["blocks"].isna().all() and (df["kernels"] == 0).all()  # no kernels on the CPU
    assert list(df["op_index"]) == list(range(len(df)))
    names = set(df["op_name"].str.split(".").str[0])
    # forward, backward, zero_grad and the optimizer step are all there
    assert {"aten::convolution", "aten::convolution_backward", "aten::native_batch_norm",
            "aten::native_batch_norm_backward", "aten::zero_", "aten::add_"} <= names
    assert not names & {"aten::view", "aten::t", "aten::detach", "aten::permute"}  # alias ops move no data
    assert (df["bytes"] > 0).mean() > 0.9 and (df["time_ms"] >= 0).all() and df["time_ms"].sum() > 0


def test_flop_total_matches_torch_flop_counter(profiled):
    df, total, step = profiled
    assert total > 0
    assert df["flops"].sum() == pytest.approx(total, rel=1e-9)
    conv = df[df["op_name"].str.startswith("aten::convolution")]
    assert (conv["flops"] > 0).all()
    # hand check: the classifier's forward GEMM is 2 x batch x in_features x 16 FLOPs
    head = step.model.get_classifier()
    gemm = df[df["op_name"].str.startswith("aten::addmm")]
    assert list(gemm["flops"]) == [2.0 * SPEC.batch_size * head.in_features * 16]
    assert (df.loc[~df["op_name"].str.match(r"aten::(convolution|addmm|mm|bmm)"), "flops"] == 0).all()


def test_habitat_and_neusight_run_on_the_profile(profiled):
    df, _, _ = profiled
    host, slow, fast = gpu_row("RTX-5090"), gpu_row("RTX-3060"), gpu_row("RTX-4090")
    hab = habitat_predict(df, host, slow)
    # every ratio (bandwidth, base clock, SMs) of RTX-5090 / RTX-3060 exceeds 1 and below 7
    assert np.isfinite(hab) and df["time_ms"].sum() < hab < 7.0 * df["time_ms"].sum()
    ns_slow, ns_fast = neusight_predict(df, slow), neusight_predict(df, fast)
    assert 0 < ns_fast < ns_slow and np.isfinite(ns_slow)
    # end to end through analytic_predictions (rows relabelled as if profiled on an RTX-5090)
    ops = df.assign(host_gpu="RTX-5090")
    targets = pd.DataFrame([dict(gpu=g, model=SPEC.model, family="CNN", img_px=32, batch_size=2, precision="fp32",
                                 latency_ms=t, oom=False, cleanup=None) for g, t in (("RTX-3060", 5.0),
                                                                                    ("RTX-5090", 1.0))])
    step = pd.DataFrame([dict(host_gpu="RTX-5090", **SPEC.key(), latency_ms=1.0)])
    pred = analytic_predictions(ops, targets, step)
    assert sorted(pred["method"]) == ["habitat", "neusight"] and set(pred["gpu"]) == {"RTX-3060"}
    assert (pred["pred_ms"] > 0).all()
    got = pred.set_index("method")["pred_ms"]
    assert got["habitat"] == pytest.approx(hab * 1.0 / df["time_ms"].sum())
    assert got["neusight"] == pytest.approx(ns_slow)


# --- bytes of one op ------------------------------------------------------------------------------


def test_op_bytes_hand_computed():
    a, b = torch.randn(4, 8), torch.randn(8, 3)
    assert op_bytes(aten.mm.default, (a, b), {}, aten.mm.default(a, b)) == ((32 + 24) * 4, 12 * 4, False)
    x, y = torch.randn(5), torch.randn(5)
    assert op_bytes(aten.add_.Tensor, (x, y), {}, x) == (40.0, 20.0, False)   # reads both, writes x
    assert op_bytes(aten.mul.Tensor, (x, x), {}, x * x) == (20.0, 20.0, False)  # the same tensor read once
    assert op_bytes(aten.zero_.default, (x,), {}, x) == (0.0, 20.0, False)     # write-only
    assert op_bytes(aten.view.default, (a, [32]), {}, a.view(32)) == (0.0, 0.0, True)
    assert op_bytes(aten.detach.default, (a,), {}, a.detach()) == (0.0, 0.0, True)
    row = torch.randn(3).expand(4, 3)
    assert tensor_span_bytes(row) == 12
    m = torch.randn(4, 3)
    assert op_bytes(aten.add.Tensor, (m, row), {}, m + row) == (48 + 12, 48, False)
    ps, gs = [torch.randn(5), torch.randn(2)], [torch.randn(5), torch.randn(2)]
    assert op_bytes(aten._foreach_add_.List, (ps, gs), {}, None) == (56.0, 28.0, False)


# --- attribution of a (fake) CUDA-style trace -----------------------------------------------------


def _ev(cat, name, ts, dur, pid=1, tid=10, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def fake_cuda_trace():
    """Hand-made events shaped like torch.profiler's chrome trace: op ranges on a forward thread
    (10) and an autograd thread (20), launch calls inside them, kernels on the GPU timeline."""
    return [
        _ev("cpu_op", f"{PREFIX}0:0", 0, 100),                      # mm on the forward thread
        _ev("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
        _ev("cuda_driver", "cuLaunchKernel", 30, 5, correlation=2),
        _ev("cpu_op", f"{PREFIX}0:1", 200, 50),                     # view: no device work
        _ev("cpu_op", f"{PREFIX}0:2", 100, 90, tid=20),             # backward op on another thread
        _ev("cpu_op", "aten::add_", 120, 40, tid=20, **{"External id": 77}),
        _ev("cuda_runtime", "cudaMemcpyAsync", 150, 5, tid=20, correlation=3),
        _ev("cpu_op", f"{PREFIX}1:0", 300, 100),                    # repeat 1 of the mm
        _ev("cuda_runtime", "cudaLaunchKernel", 310, 5, correlation=5),
        _ev("gpu_user_annotation", f"{PREFIX}0:2", 0, 1000, pid=0, tid=7),  # GPU-timeline copy: ignored
        _ev("kernel", "gemm_small", 40, 2.0, pid=0, tid=7, correlation=1, grid=[4, 1, 1], block=[128, 1, 1]),
        _ev("kernel", "gemm_main", 45, 8.0, pid=0, tid=7, correlation=2, grid=[10, 2, 1], block=[256, 1, 1]),
        _ev("gpu_memcpy", "Memcpy DtoD", 160, 1.0, pid=0, tid=7, correlation=3),
        _ev("kernel", "add_kernel", 170, 3.0, pid=0, tid=7, correlation=4, **{"External id": 77},
            grid=[1, 1, 1], block=[64, 1, 1]),                       # no launch event: External id link
        _ev("kernel", "gemm_main", 320, 9.0, pid=0, tid=7, correlation=5, grid=[10, 2, 1], block=[256, 1, 1]),
        _ev("kernel", "orphan", 900, 4.0, pid=0, tid=7, correlation=99),
    ]


def test_attribute_trace_links_kernels_to_ops():
    names = {f"{PREFIX}0:0": "aten::mm", f"{PREFIX}0:1": "aten::view", f"{PREFIX}0:2": "aten::add_",
             f"{PREFIX}1:0": "aten::mm"}
    att = attribute_trace(fake_cuda_trace(), names, "cuda")
    mm = att.ops[f"{PREFIX}0:0"]
    assert mm.time_ms == pytest.approx(0.010) and mm.kernels == 2
    assert mm.blocks == 20 and mm.threads_per_block == 256 and mm.main_kernel == "gemm_main"  # longest kernel
    add = att.ops[f"{PREFIX}0:2"]
    assert add.time_ms == pytest.approx(0.004) and add.kernels == 2 and add.blocks == 1  # memcpy has no grid
    assert att.ops[f"{PREFIX}0:1"].kernels == 0
    assert att.ops[f"{PREFIX}1:0"].time_ms == pytest.approx(0.009)
    assert att.unattributed_ms == pytest.approx(0.004) and att.device_ms == pytest.approx(0.027)


def test_ops_frame_keeps_ops_with_device_work_and_takes_the_minimum_over_repeats():
    names = {f"{PREFIX}0:0": "aten::mm", f"{PREFIX}0:1": "aten::view", f"{PREFIX}0:2": "aten::add_",
             f"{PREFIX}1:0": "aten::mm", f"{PREFIX}1:1": "aten::view", f"{PREFIX}1:2": "aten::add_"}
    att = attribute_trace(fake_cuda_trace(), names, "cuda")
    recs = []
    for r in (0, 1):
        recs += [OpRecord(r, 0, "aten::mm", 100.0, 56.0, 48.0, False),
                 OpRecord(r, 1, "aten::view", 0.0, 0.0, 0.0, True),
                 OpRecord(r, 2, "aten::add_.Tensor", 0.0, 40.0, 20.0, False)]
    spec = WorkloadSpec("resnet18", 64, 16)
    df = ops_frame(recs, att, spec, "H200-SXM", "cuda")
    assert list(df["op_name"]) == ["aten::mm", "aten::add_.Tensor"] and list(df["op_index"]) == [0, 1]
    # mm: min(0.010, 0.009); add_: its repeat-1 work is not in the trace, so repeat 0's time stands
    assert list(df["time_ms"]) == pytest.approx([0.009, 0.004])
    assert list(df["bytes"]) == [104.0, 60.0] and list(df["blocks"]) == [20.0, 1.0]
    assert set(df["device"]) == {"cuda"} and df.attrs["unattributed_ms"] == pytest.approx(0.004)


def test_cpu_time_is_the_innermost_event_of_the_op():
    events = [_ev("cpu_op", f"{PREFIX}0:0", 0, 100), _ev("cpu_op", "aten::mm", 5, 90),
              _ev("cpu_op", "PythonDispatchMode", 10, 80), _ev("cpu_op", "aten::mm", 20, 30),
              _ev("cpu_op", f"{PREFIX}0:1", 200, 40)]
    att = attribute_trace(events, {f"{PREFIX}0:0": "aten::mm", f"{PREFIX}0:1": "aten::relu"}, "cpu")
    assert att.ops[f"{PREFIX}0:0"].time_ms == pytest.approx(0.030)
    assert att.ops[f"{PREFIX}0:1"].time_ms == pytest.approx(0.040)  # no inner event: the range itself


# --- config job --------------------------------------------------------------------------------


CFG = {"host_gpu": "RTX-5090", "models": ["resnet18", "resnet50"], "img_sizes": [64, 224],
       "ops_batch_sizes": [16], "ops_precisions": ["fp32"]}
RTX5090 = DeviceInfo(name="NVIDIA GeForce RTX 5090", is_cuda=True, sms=170)


def _fake_profiler(oom_for=()):
    calls = []

    def run(spec, device, host, repeats=3, synthetic=False):
        calls.append((spec.model, spec.img_px, device, host))
        if (spec.model, spec.img_px) in oom_for:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (fake)")
        return OP_PROFILE.validate(pd.DataFrame(dict(
            host_gpu=host, **spec.key(), op_index=[1, 0], op_name=["b", "a"], flops=[1.0, 2.0], bytes=[4.0, 8.0],
            time_ms=[0.5, 0.25], blocks=[np.nan, 3.0], synthetic=True, device="cuda")))

    run.calls = calls
    return run


def test_host_ops_job_writes_sorted_rows_and_skips_oom(tmp_path):
    prof = _fake_profiler(oom_for={("resnet50", 224)})
    out = tmp_path / "ops" / "RTX-5090.csv"
    df = host_ops_job(CFG, out, profiler=prof, info=RTX5090)
    assert [c[:2] for c in prof.calls] == [("resnet18", 64), ("resnet18", 224), ("resnet50", 64), ("resnet50", 224)]
    assert {c[2:] for c in prof.calls} == {("cuda", "RTX-5090")}
    back = OP_PROFILE.validate(read_csv(out))
    assert len(back) == 6 and ("resnet50", 224) not in set(zip(back["model"], back["img_px"]))
    assert list(back["op_index"][:2]) == [0, 1] and back.equals(df)


def test_host_ops_job_refuses_another_device_and_total_failure(tmp_path):
    out = tmp_path / "x.csv"
    with pytest.raises(DeviceStateError, match="no CUDA device"):
        host_ops_job(CFG, out, profiler=_fake_profiler(), info=DeviceInfo(name="cpu", is_cuda=False))
    with pytest.raises(DeviceStateError, match="RTX-5090"):
        host_ops_job(CFG, out, profiler=_fake_profiler(), info=DeviceInfo(name="NVIDIA GeForce RTX 3060", is_cuda=True))
    every = {(m, s) for m in CFG["models"] for s in CFG["img_sizes"]}
    with pytest.raises(DeviceStateError, match="no workload could be profiled"):
        host_ops_job(CFG, out, profiler=_fake_profiler(oom_for=every), info=RTX5090)
    assert not out.exists()


# --- the H200 script's optional step (CPU smoke) -----------------------------------------------


SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "device" / "emulation_h200.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("emulation_h200_ops_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_h200_script_dry_run_lists_the_ops_workloads(script, capsys):
    assert script.main(["--dry-run", "--out", "unused", "--profile-ops"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out.split("): ", 1)[1].splitlines()[0])
    assert plan["ops_workloads"] == [f"{m} {s}px" for m in script.OPS_MODELS for s in (224, 128, 64)]
    assert plan["points"] == 5 * 3 * 6  # the sweep itself is unchanged


def test_h200_script_cpu_smoke_writes_an_ops_profile(script, tmp_path):
    out, ref = tmp_path / "out", tmp_path / "ref"
    assert script.main(["--cpu-smoke", "--profile-ops", "--models", "test_vit", "--imgs", "32", "--batch", "2",
                        "--sms", "16", "--replays", "1", "--out", str(out), "--reference-dir", str(ref)]) == 0
    assert not ref.exists()  # smoke rows never reach a measurement folder
    ops = OP_PROFILE.validate(read_csv(out / "emulation_h200_ops.csv"))
    assert set(ops["model"]) == {"test_vit"} and ops["synthetic"].all() and set(ops["device"]) == {"cpu"}
    assert ops["flops"].sum() > 0
    run = json.loads((out / "emulation_h200_run.json").read_text())
    assert run["ops"]["workloads"] == 1 and run["ops"]["rows"] == len(ops) and run["ops"]["skipped"] == []
    assert run["rows"] == {"ok": 2}  # the sweep still ran (whole device + one partition)
