"""Noise floor of the timing labels (traintime.chronos.noise_floor)."""

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.noise_floor import REPLICATE_KEY, best_constant_ape, loo_median_ape, replicate_floor
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
