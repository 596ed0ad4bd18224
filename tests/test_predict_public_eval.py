"""Public-measurement evaluation of ``traintime predict`` (traintime.predict_public_eval) and ``--step-model``."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traintime.predict_public_eval import (pair_order, predict_subset, step_model_selection, step_models,
                                           summarise, trace_subset)


def _pred(y: list[float], p: list[float], model: str = "m") -> pd.DataFrame:
    return pd.DataFrame({"model": model, "img_px": 224, "batch_size": 16, "precision": "fp32",
                         "gpu": [f"g{i}" for i in range(len(y))], "latency_ms": y, "pred_ms": p})


def test_pair_order_counts_pairs_within_each_workload() -> None:
    a = _pred([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])  # 3 pairs, all right
    b = _pred([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], model="n")  # 3 pairs, all wrong
    assert pair_order(a) == (3, 3)
    assert pair_order(pd.concat([a, b])) == (3, 6)
    tie = _pred([1.0, 1.0], [1.0, 2.0])  # equal measured times: not a pair
    assert pair_order(tie) == (0, 0)


def test_summarise_mape_median_and_ratio() -> None:
    d = _pred([10.0, 20.0, 40.0], [12.0, 20.0, 20.0]).assign(method="x", family_predict="CNN")
    s = summarise(d)
    row = s[(s["method"] == "x") & (s["slice"] == "all")].iloc[0]
    assert row["mape_pct"] == pytest.approx((20 + 0 + 50) / 3)
    assert row["median_ape_pct"] == pytest.approx(20.0)
    assert row["pairs_right_pct"] == pytest.approx(100 * 2 / 3)
    assert row["geo_mean_pred_over_measured"] == pytest.approx(np.exp(np.mean(np.log([1.2, 1.0, 0.5]))))
    assert row["mape_target_met"]  # 23.3 % <= 25 %
    assert not row["pairs_target_met"]  # 66.7 % < 90 %


def test_subset_drops_oom_and_other_settings() -> None:
    t = pd.DataFrame({"model": "resnet18", "img_px": [224, 224, 64, 224], "batch_size": [16, 16, 16, 32],
                      "precision": ["fp32", "fp32", "fp32", "fp32"], "latency_ms": [5.0, 6.0, 1.0, 9.0],
                      "oom": [False, True, False, False], "gpu": ["RTX-4090", "RTX-3090", "RTX-4090", "RTX-4090"]})
    s = trace_subset(t, 224, ["fp32"], [16])
    assert list(s["latency_ms"]) == [5.0]


def test_predict_subset_runs_the_predict_path_per_gpu() -> None:
    from traintime.core.gpudb import gpu_database

    t = pd.DataFrame({"model": ["resnet18"] * 2 + ["no_such_model_xyz"], "img_px": 224, "batch_size": 16,
                      "precision": "fp32", "latency_ms": [20.0, 10.0, 5.0], "oom": False,
                      "gpu": ["RTX-3060", "RTX-4090", "RTX-4090"]})
    pred = predict_subset(trace_subset(t), gpu_database(None), step_models(None))
    assert set(pred["method"]) == {"roofline_assumed"}
    p = pred.set_index("gpu")["pred_ms"]
    assert p["RTX-4090"] < p["RTX-3060"]  # faster card, faster step
    assert any("no_such_model_xyz" in s for s in pred.attrs["skipped"])


def test_step_model_selection_is_grouped_by_gpu(repo_root: Path) -> None:
    from traintime.core.gpudb import gpu_database

    rng = np.random.default_rng(0)
    gpus = ["T4", "A100-PCIe-80GB", "V100-SXM2-16GB", "L4"]
    rows = []
    for g in gpus:
        for b in (32, 64, 128):
            rows.append({"status": "ok", "family": "CNN", "gpu": g, "batch_size": b, "precision_bits": 32,
                         "flops_train_per_batch": 3e9 * b, "param_bytes": 4e7, "grad_bytes": 4e7,
                         "optimizer_state_bytes": 4e7, "act_bytes_per_sample_proxy": 4e6, "depth": 20,
                         "bn_layers": 20, "act_layers": 20, "model": "m", "input_px": 32,
                         "compute_time_ms": float(rng.uniform(5, 50)), "step_time_ms": 1.0})
    t = step_model_selection(pd.DataFrame(rows), gpu_database(None))
    assert set(t["method"]) == {"roofline_calibrated", "roofline_assumed"}
    assert (t["gpus"] == 4).all() and t["chosen"].sum() == 1


def test_step_model_option_names_the_model(tmp_path: Path) -> None:
    from traintime.cli import build_parser
    from traintime.predict_run import run_predict

    (tmp_path / "m").mkdir()
    (tmp_path / "d").mkdir()
    base = ["predict", "--model", "resnet18", "--dataset", "cifar10", "--no-probe", "--gpus", "T4,RTX-4090",
            "--models-dir", str(tmp_path / "m"), "--data-dir", str(tmp_path / "d")]
    out = io.StringIO()
    run_predict(build_parser().parse_args(base + ["--step-model", "roofline-assumed"]), out=out)
    assert "step-time model (--step-model roofline-assumed)" in out.getvalue()
    out2 = io.StringIO()
    run_predict(build_parser().parse_args(base), out=out2)
    assert "step-time model (--step-model roofline)" in out2.getvalue()
    with pytest.raises(Exception):
        build_parser().parse_args(base + ["--step-model", "nope"])
