"""The smooth-efficiency step model recovers a known efficiency law on synthetic data and extrapolates in work size."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.efficiency_frozen import (
    FEATURES,
    FrozenEfficiency,
    efficiency_features,
)
from traintime.chronos.efficiency_step import EfficiencyStepTime, source_weights
from traintime.core.errors import SchemaError


def synthetic_rows(n: int, rng: np.random.Generator, flops_range: tuple[float, float]) -> pd.DataFrame:
    """Synthetic step rows (labelled synthetic: no measurement) over a range of log10 FLOPs per step."""
    lf = rng.uniform(*flops_range, n)
    return pd.DataFrame({
        "model": "synthetic", "family": rng.choice(["CNN", "Transformer"], n), "input_px": 224,
        "batch_size": 32, "precision": rng.choice(["32", "16"], n), "gpu": rng.choice(list("ABCDE"), n),
        "flops_train_per_batch": 10 ** lf, "param_bytes": 10 ** rng.uniform(6, 8, n), "grad_bytes": 0.0,
        "optimizer_state_bytes": 0.0, "act_bytes_per_sample": 10 ** rng.uniform(5, 7, n),
        "layers": rng.integers(10, 200, n).astype(float), "fp32_gflops": 10 ** rng.uniform(3.5, 4.8, n),
        "fp16_gflops": 10 ** rng.uniform(4.5, 5.5, n), "memory_bandwidth_gbps": 10 ** rng.uniform(2.5, 3.4, n),
    })


def true_law(rows: pd.DataFrame) -> np.ndarray:
    """Known law: efficiency = sigmoid(-6 + 0.5 log10 FLOPs), launch 4 us per kernel."""
    x, t = efficiency_features(rows)
    eff = 1 / (1 + np.exp(-(-6.0 + 0.5 * x["log_flops"].to_numpy())))
    return t["launch_ms"].to_numpy() * 4.0 + np.maximum(t["compute_ms"], t["memory_ms"]).to_numpy() / eff


def test_recovers_known_efficiency_law_and_extrapolates_in_work_size() -> None:
    rng = np.random.default_rng(0)
    train = synthetic_rows(400, rng, (9.0, 12.0))
    test = synthetic_rows(200, rng, (12.5, 13.5))  # 0.5-1.5 decades more work than any training row
    m = EfficiencyStepTime(alpha=1e-6).fit(train, true_law(train))
    assert m.launch_us_ == pytest.approx(4.0, rel=0.05)
    # the efficiency law, in raw log10 FLOPs, is recovered: slope 0.5, other features ~0
    slope = m.coef_[1:] / m.scale_
    assert slope[FEATURES.index("log_flops")] == pytest.approx(0.5, abs=0.03)
    others = np.delete(slope, FEATURES.index("log_flops"))
    assert np.abs(others).max() < 0.03
    ape = np.abs(m.predict(test) / true_law(test) - 1)
    assert ape.mean() < 0.02
    # the known law's efficiency is reproduced on the extrapolated rows
    x, _ = efficiency_features(test)
    eff_true = 1 / (1 + np.exp(-(-6.0 + 0.5 * x["log_flops"].to_numpy())))
    assert np.allclose(m.efficiency(test), eff_true, rtol=0.03)


def test_frozen_json_round_trip_predicts_the_same() -> None:
    rng = np.random.default_rng(1)
    rows = synthetic_rows(100, rng, (9.0, 12.0))
    m = EfficiencyStepTime(trained_on="synthetic").fit(rows, true_law(rows))
    frozen = FrozenEfficiency(json.loads(json.dumps(m.to_json())))
    assert np.allclose(frozen.predict(rows), m.predict(rows))
    assert "synthetic" in frozen.label and frozen.name == "efficiency"
    assert m.get_params() == {"alpha": 0.01, "launch_us": 5.0, "trained_on": "synthetic", "features": "kernel"}


def test_source_weights_balance_sources() -> None:
    w = source_weights(["a"] * 9 + ["b"])
    assert w[:9].sum() == pytest.approx(w[9:].sum()) and w.mean() == pytest.approx(1.0)


def test_unfitted_and_too_few_rows_raise_clear_errors() -> None:
    rows = synthetic_rows(3, np.random.default_rng(2), (9.0, 10.0))
    with pytest.raises(SchemaError, match="not fitted"):
        EfficiencyStepTime().predict(rows)
    with pytest.raises(SchemaError, match="usable rows"):
        EfficiencyStepTime().fit(rows, true_law(rows))


def test_nested_choice_of_feature_set_picks_the_set_the_law_needs() -> None:
    from traintime.chronos.efficiency_step import NestedEfficiencyStepTime

    rng = np.random.default_rng(4)
    rows = synthetic_rows(400, rng, (9.0, 12.0))
    x, t = efficiency_features(rows)
    # the efficiency depends on the work per kernel (FLOPs per layer), which only the ``kernel`` set has
    eff = 1 / (1 + np.exp(-(-9.0 + 1.0 * x["log_flops_per_layer"].to_numpy() - 0.8 * x["log_flops"].to_numpy())))
    y = np.maximum(t["compute_ms"], t["memory_ms"]).to_numpy() / eff
    m = NestedEfficiencyStepTime().fit(rows, y)
    assert m.best_ == "kernel" and m.inner_mape_["kernel"] < m.inner_mape_["base"]
    assert m.to_json()["feature_set"] == "kernel"
    assert np.allclose(FrozenEfficiency(m.to_json()).predict(rows), m.predict(rows))
