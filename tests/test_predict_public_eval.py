"""Public-measurement evaluation of ``traintime predict`` (traintime.predict_public_eval) and ``--step-model``."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traintime.predict_public_eval import (
    pair_order,
    predict_subset,
    step_model_selection,
    step_models,
    summarise,
    trace_subset,
)


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


def test_operator_step_model_needs_op_graphs_one_line(tmp_path: Path) -> None:
    from traintime.core.errors import DataUnavailableError
    from traintime.core.gpudb import gpu_database
    from traintime.predict_run import default_step_model

    (tmp_path / "iteration.csv").write_text("gpu\n")
    with pytest.raises(DataUnavailableError, match="op_graphs_chronos.csv") as exc:
        default_step_model(tmp_path, tmp_path, "CNN", gpu_database(None), 0.9, None, "operator")
    assert "\n" not in str(exc.value)


def test_operator_step_model_walks_once_and_orders_gpus(monkeypatch, tmp_path: Path) -> None:
    """Fitted on synthetic times = 2 x the sum of the operator rooflines (so the efficiency is learnable), the
    step model predicts a requested workload on GPUs from its cached walk."""
    from traintime.chronos.steptime import OperatorRooflineRegressor
    from traintime.core.gpudb import gpu_database
    from traintime.emulation.steptime_traces import (
        TERMS,
        class_table,
        gpu_table,
        roofline_features,
    )
    from traintime.measure.opgraph import extrapolate
    from traintime.predict_operator import OperatorStepModel, _walks
    from traintime.predict_static import make_workload, step_rows

    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path))
    specs = gpu_database(None)
    gpus = ["T4", "A100-PCIe-80GB", "RTX-4090", "L4", "V100-SXM2-16GB"]
    w = _walks("resnet18", 32, 10, "SGD")
    og = pd.concat([extrapolate(pd.DataFrame(w["2"]), pd.DataFrame(w["3"]), [16, 64, 256])]).assign(
        model="request", img_px=32)
    cls = class_table(og)
    tr = pd.DataFrame([{"model": "request", "img_px": 32, "batch_size": b, "precision": p, "gpu": g}
                       for g in gpus for b in (16, 64, 256) for p in ("fp32", "fp16")])
    X = roofline_features(tr, cls, gpu_table(specs, gpus))
    y = 2.0 * np.exp(X[:, :len(TERMS)]).sum(axis=1) * 1e3  # ms
    reg = OperatorRooflineRegressor(n_terms=len(TERMS), alpha=1e-3).fit(X, y)
    model = OperatorStepModel(reg, specs)
    wl = make_workload("resnet18", 64, "32", dataset="cifar10")
    rows = step_rows(wl, specs.drop_duplicates("gpu").set_index("gpu").loc[["T4", "A100-PCIe-80GB"]].reset_index())
    pred = model.predict(rows)
    assert np.all(np.isfinite(pred)) and pred[1] < pred[0]  # A100 faster than T4
    expect = y[(tr["batch_size"] == 64) & (tr["precision"] == "fp32") & tr["gpu"].isin(["T4", "A100-PCIe-80GB"])]
    np.testing.assert_allclose(pred, expect, rtol=0.15)
    assert len(list(tmp_path.glob("opwalk-*.json"))) == 1
    assert "OperatorRooflineRegressor" in model.label
