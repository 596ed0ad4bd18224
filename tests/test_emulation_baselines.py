"""Baselines: FLOPS scaling, Habitat- and NeuSight-style models (hand-computed), learned cross-GPU."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.core.specs import gpu_row, load_specs
from traintime.emulation.baselines import (
    OP_PROFILE,
    CrossGPURegressor,
    analytic_predictions,
    flops_predictions,
    flops_scaling,
    fp32_peak_gflops,
    habitat_gamma,
    habitat_predict,
    habitat_scale,
    learned_features,
    leave_one_gpu_out,
    neusight_op_time,
    neusight_predict,
    neusight_util,
)

SIG2 = 1.0 / (1.0 + math.exp(-2.0))  # sigmoid(2) = 0.8808

ORIGIN = pd.Series({"gpu": "O", "sms": 100, "base_clock_mhz": 2000.0, "memory_bandwidth_gbps": 1000.0,
                    "fp32_gflops": 20000.0})
DEST = pd.Series({"gpu": "D", "sms": 50, "base_clock_mhz": 1000.0, "memory_bandwidth_gbps": 500.0,
                  "fp32_gflops": 5000.0})  # ridge = 10 FLOP/byte


def trace_rows(entries):
    return pd.DataFrame([dict(gpu=g, model=m, family=fam, img_px=px, batch_size=16, precision="fp32",
                              latency_ms=t, oom=False, cleanup=None) for g, m, fam, px, t in entries])


def test_fp32_peak_and_flops_scaling():
    assert fp32_peak_gflops(gpu_row("RTX-5090")) == pytest.approx(21760 * 2407 * 2 / 1000)
    assert flops_scaling(10.0, 100.0, 50.0) == pytest.approx(20.0)
    np.testing.assert_allclose(flops_scaling([1.0, 2.0], 60.0, np.array([30.0, 120.0])), [2.0, 1.0])


def test_flops_predictions_scale_the_host_trace():
    rows = trace_rows([("RTX-5090", "resnet50", "CNN", 224, 10.0), ("RTX-3060", "resnet50", "CNN", 224, 70.0),
                       ("RTX-3060", "vit_tiny_patch16_224", "Transformer", 224, 5.0)])
    pred = flops_predictions(rows, rows, "RTX-5090")
    assert list(pred["gpu"]) == ["RTX-3060"]          # host excluded; vit has no host latency
    expected = 10.0 * (21760 * 2407) / (3584 * 1777)  # cores x boost ratio
    assert pred["pred_ms"].iloc[0] == pytest.approx(expected)


def test_habitat_gamma_piecewise():
    np.testing.assert_allclose(habitat_gamma([0.0, 5.0, 10.0, 20.0, np.inf], 10.0), [1.0, 0.75, 0.5, 0.25, 0.0])


def test_habitat_scale_hand_computed():
    t = [1.0, 1.0, 1.0, 1.0]
    flops = [0.0, 1000.0, 50.0, 1000.0]
    nbytes = [100.0, 10.0, 10.0, 10.0]
    blocks = [np.nan, np.nan, np.nan, 10.0]  # the last op fits in one wave on both GPUs
    got = habitat_scale(t, flops, nbytes, blocks, ORIGIN, DEST)
    # ratios: BW 2, clock 2, SMs 2 -> (clk x SM) = 4
    expected = [2.0 ** 1.0,                       # memory only: gamma 1
                2.0 ** 0.05 * 4.0 ** 0.95,        # I = 100 > R = 10: gamma = 0.5 R / I = 0.05
                2.0 ** 0.75 * 4.0 ** 0.25,        # I = 5 <= R: gamma = 1 - 0.5 * 5 / 10 = 0.75
                2.0]                              # small kernel: clock ratio only
    np.testing.assert_allclose(got, expected)
    ops = pd.DataFrame({"time_ms": t, "flops": flops, "bytes": nbytes, "blocks": blocks})
    assert habitat_predict(ops, ORIGIN, DEST) == pytest.approx(sum(expected))
    # normalisation to a measured graph step: step / sum(host op times) = 2 / 4
    assert habitat_predict(ops, ORIGIN, DEST, step_ms=2.0) == pytest.approx(sum(expected) * 0.5)


def test_neusight_hand_computed():
    assert neusight_util(1.0) == pytest.approx(SIG2 - 0.5)
    assert neusight_util(np.inf) == pytest.approx(SIG2)
    spec = pd.Series({"sms": 50, "fp32_gflops": 10000.0, "memory_bandwidth_gbps": 500.0})
    got = neusight_op_time([1e9, 0.0, 1e6], [1e6, 5e8, 1e6], [100.0, np.nan, 25.0], spec)
    expected = [1e9 / (1e13 * (SIG2 - 0.5 / 2)) * 1e3,   # compute bound, 2 waves
                5e8 / (5e11 * SIG2) * 1e3,               # memory only, unknown blocks
                1e6 / (5e11 * (SIG2 - 0.5)) * 1e3]       # AI = 1: roofline = AI x BW, 1 wave
    np.testing.assert_allclose(got, expected)
    ops = pd.DataFrame({"flops": [1e9, 0.0, 1e6], "bytes": [1e6, 5e8, 1e6], "blocks": [100.0, np.nan, 25.0]})
    assert neusight_predict(ops, spec) == pytest.approx(sum(expected))


def test_analytic_predictions_on_a_synthetic_profile():
    ops = OP_PROFILE.validate(pd.DataFrame(dict(
        host_gpu="RTX-5090", model="resnet50", img_px=224, batch_size=16, precision="fp32", op_index=[0, 1],
        op_name=["conv", "relu"], flops=[1e10, 0.0], bytes=[1e7, 1e8], time_ms=[1.0, 0.5], blocks=[500.0, 1000.0],
        synthetic=True)))
    targets = trace_rows([("RTX-3060", "resnet50", "CNN", 224, 40.0), ("RTX-5090", "resnet50", "CNN", 224, 3.0)])
    step = pd.DataFrame({"host_gpu": ["RTX-5090"], "model": ["resnet50"], "img_px": [224], "batch_size": [16],
                         "precision": ["fp32"], "latency_ms": [3.0]})
    pred = analytic_predictions(ops, targets, step)
    assert sorted(pred["method"]) == ["habitat", "neusight"] and set(pred["gpu"]) == {"RTX-3060"}
    hab = pred.loc[pred["method"] == "habitat", "pred_ms"].iloc[0]
    raw = habitat_predict(ops, gpu_row("RTX-5090"), gpu_row("RTX-3060"))
    assert hab == pytest.approx(raw * 3.0 / 1.5)  # normalised to the measured host step


def synthetic_cross_gpu(n_models: int = 12):
    """Latency = host latency x (host FP32 peak / target peak)^0.9 x a model-family factor."""
    specs = load_specs()
    gpus = ["RTX-3060", "RTX-3080", "RTX-4070", "RTX-4090", "RTX-5070"]
    peak = {g: fp32_peak_gflops(gpu_row(g, specs)) for g in gpus + ["RTX-5090"]}
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n_models):
        fam = "CNN" if i % 2 else "Transformer"
        for px in (64, 224):
            h = float(rng.uniform(2, 50))
            rows.append(("RTX-5090", f"m{i}", fam, px, h))
            for g in gpus:
                rows.append((g, f"m{i}", fam, px, h * (peak["RTX-5090"] / peak[g]) ** 0.9 * (1.1 if fam == "CNN" else 1.0)))
    return trace_rows(rows), specs


def test_learned_regressor_fits_a_smooth_relation():
    rows, specs = synthetic_cross_gpu()
    data = rows[rows["gpu"] != "RTX-5090"].merge(
        rows.loc[rows["gpu"] == "RTX-5090", ["model", "img_px", "batch_size", "precision", "latency_ms"]]
        .rename(columns={"latency_ms": "host_ms"}), on=["model", "img_px", "batch_size", "precision"])
    X = learned_features(data, specs)
    assert "latency_ms" not in X.columns and X.shape[1] == 19
    est = CrossGPURegressor(n_estimators=100, random_state=0).fit(X, data["latency_ms"])
    ape = np.abs(est.predict(X) / data["latency_ms"] - 1)
    assert ape.mean() < 0.05


def test_leave_one_gpu_out_never_sees_the_held_out_gpu():
    rows, specs = synthetic_cross_gpu()
    pred = leave_one_gpu_out(rows, rows, "RTX-5090", [0, 1], specs, n_estimators=50)
    assert set(pred["gpu"]) == {"RTX-3060", "RTX-3080", "RTX-4070", "RTX-4090", "RTX-5070"}
    assert sorted(pred["seed"].unique()) == [0, 1] and len(pred) == 2 * 5 * 24
    # corrupting the held-out GPU's own latencies must not change its predictions
    bad = rows.copy()
    bad.loc[bad["gpu"] == "RTX-4070", "latency_ms"] *= 100.0
    pred_bad = leave_one_gpu_out(bad, bad, "RTX-5090", [0], specs, n_estimators=50)
    a = pred[(pred["gpu"] == "RTX-4070") & (pred["seed"] == 0)]["pred_ms"].to_numpy()
    b = pred_bad[pred_bad["gpu"] == "RTX-4070"]["pred_ms"].to_numpy()
    np.testing.assert_allclose(a, b)
    # ... while another GPU's predictions do change (the corrupted GPU is in its training set)
    c = pred[(pred["gpu"] == "RTX-3060") & (pred["seed"] == 0)]["pred_ms"].to_numpy()
    d = pred_bad[pred_bad["gpu"] == "RTX-3060"]["pred_ms"].to_numpy()
    assert not np.allclose(c, d)
