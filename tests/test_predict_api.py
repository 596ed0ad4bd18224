"""The predict API on fake saved models: rows it builds, arithmetic of the estimate, intervals, ranking."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.conformal import SplitConformal
from traintime.chronos.convergence import ConvergencePredictor
from traintime.chronos.estimators import IterationTimePredictor
from traintime.core.errors import TraintimeError
from traintime.core.specs import load_specs
from traintime.predict import TrainingTimePredictor


class FakeStep:
    """Step time = training GFLOPs per step / (FP32 TFLOP/s of the GPU), in ms; records its input rows."""

    seen: list[pd.DataFrame] = []

    def predict(self, rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> np.ndarray:
        FakeStep.seen.append(rows.copy())
        fp32 = specs.set_index("gpu").loc[rows["gpu"], "fp32_gflops"].to_numpy(dtype=float)
        return rows["flops_train_per_sample"].to_numpy(dtype=float) * rows["batch_size"].to_numpy() / fp32 / 1e6 + 1.0


class FakeEpochs:
    seen: list[pd.DataFrame] = []

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        FakeEpochs.seen.append(rows.copy())
        return np.full(len(rows), 20.0)


@pytest.fixture()
def saved(tmp_path):
    models = tmp_path / "models"
    (models / "iteration").mkdir(parents=True)
    (models / "convergence").mkdir(parents=True)
    IterationTimePredictor({"MLP": FakeStep(), "CNN": FakeStep()},
                           {"feature_set": "clean", "estimator": "xgboost"}).save(
        models / "iteration" / "iteration_model.joblib")
    ConvergencePredictor(FakeEpochs(), {"method": "chronos_rf"}).save(str(models / "convergence" / "chronos_rf.joblib"))
    data = tmp_path / "data"
    (data / "iteration_predictions").mkdir(parents=True)
    (data / "convergence_predictions").mkdir(parents=True)
    # out-of-fold residuals: measured / predicted = 0.5 ... 1.5 (step), 0.8 ... 1.25 (epochs)
    ratios = np.linspace(0.5, 1.5, 101)
    pd.DataFrame({"family": "MLP", "protocol": "lomo", "feature_set": "clean", "estimator": "xgboost", "seed": 0,
                  "fold": "x", "row_id": [f"r{i}" for i in range(101)], "model": "m", "dataset": "d", "gpu": "T4",
                  "y_true_ms": 10 * ratios, "y_pred_ms": 10.0}).to_csv(data / "iteration_predictions" / "lomo.csv",
                                                                          index=False)
    er = np.linspace(0.8, 1.25, 51)
    pd.DataFrame({"protocol": "lomo", "method": "chronos_rf", "seed": 0, "family": "MLP",
                  "model": np.where(np.arange(51) % 2, "m", "n"),
                  "epochs_measured": 20 * er, "epochs_predicted": 20.0}).to_csv(
        data / "convergence_predictions" / "chronos_rf.csv", index=False)
    return models, data


def _predictor(saved, **kw) -> TrainingTimePredictor:
    models, data = saved
    args = dict(model="mixer", dataset="digits", optimizer="adamw", batch_size=32, learning_rate=0.001, precision=32,
                gpu="T4", models_dir=models, data_dir=data, probe_batch_size=8, device="cpu", coverage=0.8,
                model_kwargs={"embed_dim": 16, "depth": 1}, convergence_method="chronos_rf")
    args.update(kw)
    return TrainingTimePredictor(**args)


def test_estimate_arithmetic_and_rows(saved) -> None:
    FakeStep.seen.clear()
    FakeEpochs.seen.clear()
    p = _predictor(saved)
    est = p.estimate()
    specs = load_specs()
    t4 = specs.set_index("gpu").loc["T4"]
    rows = FakeStep.seen[-1]
    assert list(rows["gpu"]) == ["T4"] and rows["family"].iloc[0] == "MLP"
    assert rows["model"].iloc[0] == "mixer" and rows["dataset"].iloc[0] == "digits" and rows["optimizer"].iloc[0] == "AdamW"
    assert rows["embed_dim"].iloc[0] == 16 and rows["input_px"].iloc[0] == 32
    step = rows["flops_train_per_sample"].iloc[0] * 32 / t4["fp32_gflops"] / 1e6 + 1.0
    assert est.step_ms == pytest.approx(step)
    assert est.epoch_s == pytest.approx(1797 / 32 * step / 1000)
    assert est.epochs == 20.0
    assert est.hours == pytest.approx(20 * est.epoch_s / 3600)
    assert est.cost_usd == pytest.approx(est.hours * t4["price_per_hour_usd"])
    conv = FakeEpochs.seen[-1].iloc[0]
    assert conv["model"] == "mixer" and conv["family"] == "MLP" and conv["embed_dim"] == 16
    assert conv["ntk_trace_proxy_log10"] == pytest.approx(2 * conv["gradient_norm_log10"], abs=1e-6)
    assert conv["dataset_size"] == 1797 and conv["batch_size"] == 32


def test_intervals_from_out_of_fold_residuals(saved) -> None:
    est = _predictor(saved).estimate()
    # no iteration.csv in data_dir: the model counts as unseen -> lomo residuals for both
    assert est.step_protocol == "lomo" and est.epochs_protocol == "lomo"
    # split conformal as `traintime predict` (coverage 0.8, no finite-sample correction): the ceil(0.8 n)-th smallest
    # |log ratio|, symmetric in log around the prediction
    r = np.sort(np.abs(np.log(np.linspace(0.5, 1.5, 101))))
    q = r[math.ceil(0.8 * 101) - 1]
    assert est.step_ms_low == pytest.approx(est.step_ms * math.exp(-q))
    assert est.step_ms_high == pytest.approx(est.step_ms * math.exp(q))
    er = np.linspace(0.8, 1.25, 51)
    qe = SplitConformal(0.8, finite_sample=False).fit(20 * er, np.full(51, 20.0),
                                                      np.where(np.arange(51) % 2, "m", "n")).log_halfwidth
    assert 0 < qe < np.log(1.25)
    assert est.epochs_low == pytest.approx(est.epochs * math.exp(-qe))
    assert est.epochs_high == pytest.approx(est.epochs * math.exp(qe))
    hq = math.hypot(q, qe)  # step and epochs half-widths in quadrature, as `traintime predict`
    assert est.hours_low == pytest.approx(est.hours * math.exp(-hq))
    assert est.hours_high == pytest.approx(est.hours * math.exp(hq))
    assert est.cost_usd_high == pytest.approx(est.hours_high * est.price_per_hour_usd)
    assert est.step_cv_mape_pct == pytest.approx(np.mean(np.abs(np.linspace(0.5, 1.5, 101) - 1) / np.linspace(0.5, 1.5, 101)) * 100)


def test_ranking_covers_every_gpu_and_orders_by_cost(saved) -> None:
    table = _predictor(saved).ranking()
    specs = load_specs()
    assert sorted(table["gpu"]) == sorted(specs["gpu"])
    priced = table.dropna(subset=["cost_usd"])
    assert list(priced["cost_usd"]) == sorted(priced["cost_usd"])
    assert table["rank_by_time"].min() == 1
    fastest = table.loc[table["rank_by_time"] == 1, "gpu"].iloc[0]
    assert fastest == specs.loc[specs["fp32_gflops"].idxmax(), "gpu"]  # the fake is FP32-bound


def test_missing_models_and_bad_coverage(saved, tmp_path) -> None:
    with pytest.raises(TraintimeError, match="model file not found"):
        _predictor(saved, models_dir=tmp_path / "none").estimate()
    with pytest.raises(TraintimeError, match="coverage"):
        _predictor(saved, coverage=1.5)
