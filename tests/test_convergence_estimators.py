"""Convergence estimators and baselines against hand-computed values on tiny synthetic data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence import (
    ConstantPredictor,
    ConvergencePredictor,
    GroupMedian,
    NTKGuided,
    PerFamily,
    ReleasedPipeline,
    ScalingLaw,
    make_estimator,
    released_feature_frame,
)
from traintime.core.errors import UnknownNameError
from traintime.data.chronos_convergence import PROBE_COLUMNS


def synthetic_rows(n: int = 40, seed: int = 0) -> pd.DataFrame:
    """Canonical-looking rows with made-up values (two families)."""
    rng = np.random.default_rng(seed)
    g = rng.uniform(-0.3, 0.4, n)
    rows = pd.DataFrame({
        "family": np.where(np.arange(n) < n // 2, "CNN", "MLP"),
        "model": rng.choice(["m1", "m2", "m3"], n), "dataset": rng.choice(["d1", "d2"], n),
        "task": None, "optimizer": rng.choice(["SGD", "AdamW"], n),
        "learning_rate": rng.choice([5e-4, 1e-3, 2e-3], n), "batch_size": rng.choice([32, 64, 128], n),
        "precision_bits": 16, "num_classes": rng.choice([10, 100], n), "dataset_size": rng.choice([5000, 50000], n),
        "param_count": rng.integers(10**5, 10**8, n),
        "gradient_norm_log10": g, "ntk_trace_proxy_log10": 2 * g, "initial_loss_log10": rng.uniform(0.3, 0.4, n),
        "patience": 7, "min_delta": 5e-4, "max_epochs": 200, "seed": 42,
    })
    rows["epochs_to_converge"] = rng.integers(5, 60, n)
    rows["t80_close_epochs"] = np.ceil(0.8 * rows["epochs_to_converge"]).astype(int)
    rows["t90_close_epochs"] = np.ceil(0.9 * rows["epochs_to_converge"]).astype(int)
    return rows


def test_scaling_law_recovers_planted_coefficients():
    rows = synthetic_rows(60)
    logt = (0.5 + 0.2 * np.log10(rows.param_count) - 0.3 * np.log10(rows.dataset_size)
            + 0.4 * np.log10(rows.batch_size) - 0.1 * np.log10(rows.learning_rate))
    est = ScalingLaw().fit(rows, 10 ** logt)
    assert est.intercept_ == pytest.approx(0.5, abs=1e-8)
    assert est.coef_ == pytest.approx({"param_count": 0.2, "dataset_size": -0.3, "batch_size": 0.4,
                                       "learning_rate": -0.1}, abs=1e-8)
    np.testing.assert_allclose(est.predict(rows), 10 ** logt, rtol=1e-8)


def test_ntk_guided_formula_and_fit():
    rows = synthetic_rows(30)
    g2 = 10 ** rows.ntk_trace_proxy_log10
    signal = rows.learning_rate * g2 * rows.dataset_size / rows.batch_size
    np.testing.assert_allclose(NTKGuided.signal_log10(rows), np.log10(signal), rtol=1e-10)
    y = 10 ** (1.2 - 0.25 * np.log10(signal))
    est = NTKGuided().fit(rows, y)
    assert (est.intercept_, est.slope_) == pytest.approx((1.2, -0.25), abs=1e-8)


def test_constant_predictors():
    rows = synthetic_rows(5)
    y = np.array([10.0, 20.0, 30.0, 100.0, 40.0])
    assert ConstantPredictor("mean").fit(rows, y).predict(rows[:2]).tolist() == [40.0, 40.0]
    assert ConstantPredictor("median").fit(rows, y).predict(rows[:3]).tolist() == [30.0] * 3
    with pytest.raises(UnknownNameError):
        ConstantPredictor("mode").fit(rows, y)


def test_group_median_hand_values_and_fallback():
    train = pd.DataFrame({"model": ["a", "a", "a", "b", "b"], "dataset": ["x"] * 5, "optimizer": ["SGD"] * 5})
    y = [10, 20, 40, 7, 9]
    est = GroupMedian().fit(train, y)
    test = pd.DataFrame({"model": ["a", "b", "c"], "dataset": ["x", "x", "x"], "optimizer": ["SGD"] * 3})
    assert est.predict(test).tolist() == [20.0, 8.0, 10.0]  # unseen group -> median of all (10)


def test_per_family_fits_each_family_separately():
    rows = synthetic_rows(10)
    y = np.where(rows.family == "CNN", 10.0, 50.0)
    est = PerFamily(ConstantPredictor("mean")).fit(rows, y)
    assert sorted(est.models_) == ["CNN", "MLP"]
    np.testing.assert_array_equal(est.predict(rows), y)
    with pytest.raises(UnknownNameError, match="Transformer"):
        est.predict(rows.assign(family="Transformer"))


def test_released_features_exclude_targets_and_optionally_probes():
    rows = synthetic_rows(40)
    X = released_feature_frame(rows)
    assert not {"epochs_to_converge", "t80_close_epochs", "t90_close_epochs"} & set(X.columns)
    assert set(PROBE_COLUMNS) <= set(X.columns)
    np.testing.assert_allclose(X["batch_size_log10"], np.log10(rows.batch_size))
    assert not set(PROBE_COLUMNS) & set(released_feature_frame(rows, use_probe=False).columns)


def test_released_pipeline_drops_constant_and_empty_columns():
    rows = synthetic_rows(40)
    est = ReleasedPipeline("rf", n_estimators=20, random_state=0).fit(rows, rows.epochs_to_converge)
    for col in ("patience", "min_delta", "max_epochs", "seed", "precision_bits", "task", "embed_dim"):
        assert col in est.dropped_features_
    assert "gradient_norm_log10" in est.numeric_features_
    assert est.categorical_features_ == ["dataset", "model", "family", "optimizer"]
    no_probe = ReleasedPipeline("rf", use_probe=False, n_estimators=20).fit(rows, rows.epochs_to_converge)
    assert not set(PROBE_COLUMNS) & set(no_probe.numeric_features_)
    p = est.predict(rows.assign(model="unseen"))  # unknown category -> zeros, no error
    assert p.shape == (40,) and np.all(np.isfinite(p))


def test_forest_learns_a_simple_signal_and_is_seeded():
    rows = synthetic_rows(60)
    y = np.where(rows.optimizer == "SGD", 40.0, 10.0)
    a = make_estimator("chronos_rf", random_state=3).fit(rows, y).predict(rows)
    b = make_estimator("chronos_rf", random_state=3).fit(rows, y).predict(rows)
    np.testing.assert_array_equal(a, b)
    assert np.mean(np.abs(a - y) / y) < 0.05


def test_xgb_estimator_runs():
    rows = synthetic_rows(40)
    p = make_estimator("chronos_xgb").fit(rows, rows.epochs_to_converge).predict(rows)
    assert p.shape == (40,) and np.all(np.isfinite(p))


def test_unknown_estimator_name_suggests():
    with pytest.raises(UnknownNameError, match="did you mean: chronos_rf"):
        make_estimator("chronos_rff")


def test_predictor_save_load_roundtrip(tmp_path):
    rows = synthetic_rows(30)
    model = ConvergencePredictor.fit_all(rows, "group_median")
    path = tmp_path / "m.joblib"
    model.save(str(path))
    back = ConvergencePredictor.load(str(path))
    np.testing.assert_array_equal(back.predict(rows), model.predict(rows))
    assert back.metadata["n_training_runs"] == 30 and back.metadata["method"] == "group_median"
