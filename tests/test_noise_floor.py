"""Noise floor of the timing labels (traintime.chronos.noise_floor)."""

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.noise_floor import (
    REPLICATE_KEY,
    additive_fit,
    best_constant_ape,
    fit_floor,
    loo_median_ape,
    power_law_fit,
    replicate_floor,
)
from traintime.core.errors import SchemaError


def test_best_constant_by_hand():
    # weights 1/v = 1, 1, 0.5: the weighted median is 1 -> errors 0, 0, 50 %
    np.testing.assert_allclose(best_constant_ape(np.array([2.0, 1.0, 1.0])), [0.0, 0.0, 50.0])
    np.testing.assert_allclose(best_constant_ape(np.array([5.0])), [0.0])


def test_best_constant_is_a_lower_bound_for_every_constant():
    rng = np.random.default_rng(0)
    for _ in range(200):
        v = rng.lognormal(0.0, 0.5, size=rng.integers(2, 7))
        floor = best_constant_ape(v).mean()
        for c in np.concatenate([v, rng.lognormal(0.0, 0.6, 50)]):
            assert floor <= np.mean(np.abs(c / v - 1.0)) * 100.0 + 1e-9


def test_loo_median_by_hand():
    # 1 <- median(1, 2) = 1.5: 50 %; 1 <- 1.5: 50 %; 2 <- median(1, 1) = 1: 50 %
    np.testing.assert_allclose(loo_median_ape(np.array([1.0, 1.0, 2.0])), [50.0, 50.0, 50.0])
    with pytest.raises(ValueError):
        loo_median_ape(np.array([1.0]))


def _rows(times, **over):
    base = dict(family="CNN", model="m", dataset="d", optimizer="SGD", batch_size=32, precision_bits=32, amp=0,
                gpu="A100", param_count=10, flops_train_per_batch=100.0, step_time_ms=1.0, loader_wait_ms=0.5)
    return pd.DataFrame([{**base, **over, "learning_rate": lr, "compute_time_ms": t}
                         for lr, t in zip([0.1, 0.01, 0.001], times)])


def test_groups_are_learning_rate_replicates_only():
    same = _rows([1.0, 1.0, 2.0])
    other_arch = _rows([4.0, 4.0, 4.0], param_count=20)  # same model name, another architecture: its own group
    t = replicate_floor(pd.concat([same, other_arch], ignore_index=True), labels=["compute_time_ms"])
    row = t[t["family"] == "ALL"].iloc[0]
    assert row["groups"] == 2 and row["rows"] == 6 and row["replicates_per_group"] == 3
    assert row["oracle_mape_pct"] == pytest.approx(50.0 / 6)
    assert row["loo_replicate_mape_pct"] == pytest.approx(150.0 / 6)


def test_single_rows_and_bad_labels_are_counted_not_scored():
    one = _rows([1.0, 2.0, 3.0]).iloc[:1].assign(gpu="T4")
    zero = _rows([0.0, 1.0, 1.0], gpu="V100")
    ok = _rows([1.0, 1.0, 1.0], gpu="L4")
    t = replicate_floor(pd.concat([one, zero, ok], ignore_index=True), labels=["compute_time_ms"])
    row = t[t["family"] == "ALL"].iloc[0]
    assert row["rows"] == 3 and row["rows_left_out"] == 4 and row["oracle_mape_pct"] == 0.0


def test_missing_column_names_it():
    with pytest.raises(SchemaError, match="param_count"):
        replicate_floor(_rows([1.0, 1.0, 1.0]).drop(columns="param_count"))
    assert "learning_rate" not in REPLICATE_KEY


def test_additive_fit_is_the_least_squares_two_way_fit():
    rng = np.random.default_rng(1)
    w, c = rng.integers(0, 6, 80), rng.integers(0, 4, 80)
    w[:6], c[:4] = np.arange(6), np.arange(4)
    exact = rng.normal(size=6)[w] + rng.normal(size=4)[c]
    np.testing.assert_allclose(additive_fit(exact, w, c), exact, atol=1e-8)
    y = exact + rng.normal(scale=0.3, size=80)
    dummies = np.column_stack([np.eye(6)[w], np.eye(4)[c]])
    lstsq = dummies @ np.linalg.lstsq(dummies, y, rcond=None)[0]
    np.testing.assert_allclose(additive_fit(y, w, c), lstsq, atol=1e-8)
    np.testing.assert_allclose(additive_fit(y, w, None), pd.Series(y).groupby(w).transform("mean"))


def test_power_law_fit_recovers_one_law_per_workload():
    rng = np.random.default_rng(2)
    w = np.repeat([0, 1, 2], 7)
    x = rng.normal(size=(21, 2))
    slopes = np.array([[1.0, -0.5], [0.0, 2.0], [-1.0, 0.3]])
    y = 0.7 * w + (x * slopes[w]).sum(axis=1)
    np.testing.assert_allclose(power_law_fit(y, w, x), y, atol=1e-10)


def _grid(factor_of) -> pd.DataFrame:
    """Two workloads x three GPUs x three learning-rate replicates; compute time = workload time x factor_of(gpu, model)."""
    specs = {"A100": (19500.0, 1940.0, 108), "T4": (8100.0, 320.0, 40), "L4": (30300.0, 300.0, 58)}
    out = []
    for model, base in (("m", 10.0), ("n", 40.0)):
        for gpu, (peak, bw, sms) in specs.items():
            t = base * factor_of(gpu, model)
            out.append(_rows([t, t, t], model=model, gpu=gpu, fp32_gflops=peak, memory_bandwidth_gbps=bw, sms=sms,
                             step_time_ms=t + 1.0))
    return pd.concat(out, ignore_index=True)


def test_fit_floor_scores_each_class_in_sample():
    speed = {"A100": 1.0, "T4": 3.0, "L4": 2.0}
    t = fit_floor(_grid(lambda g, m: speed[g]), labels=["compute_time_ms"]).set_index("model_class")
    assert t.loc["workload + GPU", "mape_pct"] == pytest.approx(0.0, abs=1e-6)  # one speed factor per GPU fits exactly
    assert t.loc["workload only (the GPU ignored)", "mape_pct"] > 20.0
    assert t.loc["workload + GPU", "parameters"] == 2 + 3 - 1 and t.loc["workload + GPU", "workloads"] == 2
    # the GPU's factor differs by model: one factor per GPU no longer fits, one per GPU and model does
    inter = fit_floor(_grid(lambda g, m: speed[g] * (2.0 if (g, m) == ("T4", "n") else 1.0)),
                      labels=["compute_time_ms"]).set_index("model_class")
    assert inter.loc["workload + GPU", "mape_pct"] > 5.0
    assert inter.loc["workload + GPU x model", "mape_pct"] == pytest.approx(0.0, abs=1e-6)
    assert inter.loc["workload + GPU x model", "mape_pct_CNN"] == pytest.approx(0.0, abs=1e-6)


def test_fit_floor_names_a_missing_spec():
    with pytest.raises(SchemaError, match="sms"):
        fit_floor(_grid(lambda g, m: 1.0).drop(columns="sms"))
