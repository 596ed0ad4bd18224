"""Iteration tables over seeds: mean, sd and the 95 % Student-t interval; the nested-choice counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from traintime.chronos.iteration_tables import (
    grouped_summary,
    grouped_table,
    load_reference,
)
from traintime.chronos.selection import nested_choices_table
from traintime.core.metrics import mean_sd_ci95


def test_mean_sd_ci95_is_the_t_interval():
    m, sd, lo, hi = mean_sd_ci95([10.0, 12.0, 14.0])
    half = stats.t.ppf(0.975, 2) * 2.0 / np.sqrt(3)
    assert (m, sd) == (12.0, 2.0) and lo == pytest.approx(12 - half) and hi == pytest.approx(12 + half)
    assert np.isnan(mean_sd_ci95([5.0])[2])  # one seed: no interval is claimed


def _pred(seeds=(0, 1, 2)):
    rows = []
    for s in seeds:
        for fold in ("g0", "g1"):
            for i in range(4):
                rows.append(dict(family="CNN", protocol="logo", feature_set="nested", estimator="nested", seed=s,
                                 fold=fold, row_id=f"{fold}:{i}", model="m", dataset="d", gpu=fold, y_true_ms=100.0,
                                 y_pred_ms=100.0 + 10 * (s + 1)))
    return pd.DataFrame(rows)


def test_grouped_tables_carry_the_interval_over_seeds():
    t = grouped_table(_pred(), "logo")
    r = t.iloc[0]
    # per seed MAPE 10, 20, 30 -> mean 20, sd 10
    assert r["mape_pct_mean"] == pytest.approx(20) and r["mape_pct_sd"] == pytest.approx(10)
    assert r["mape_pct_ci95_high"] - r["mape_pct_mean"] == pytest.approx(stats.t.ppf(0.975, 2) * 10 / np.sqrt(3))
    s = grouped_summary(_pred(), load_reference())
    a = s[s["family"] == "ALL"].iloc[0]
    assert a["n_seeds"] == 3 and a["mean_group_mape_pct_ci95_low"] < 20 < a["mean_group_mape_pct_ci95_high"]


def test_nested_choices_table_counts_choices_per_fold_and_seed():
    ch = pd.DataFrame([dict(family="CNN", protocol="logo", seed=s, fold=f, candidate=c, inner_score_mape_pct=sc,
                            chosen=(c == "a") == (f != "g2"))
                       for s in (0, 1) for f in ("g0", "g1", "g2") for c, sc in (("a", 10.0), ("b", 20.0))])
    t = nested_choices_table(ch).set_index("candidate")
    assert t.loc["a", "n_chosen"] == 4 and t.loc["b", "n_chosen"] == 2 and (t["n_choices"] == 6).all()
    assert t.loc["a", "chosen_share_pct"] == pytest.approx(400 / 6) and t.loc["a", "n_seeds"] == 2
