"""Protocols never leak test rows; evaluation tables reproduce hand-computed MAPEs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_convergence_estimators import synthetic_rows

from traintime.chronos.convergence import ESTIMATORS, ConstantPredictor, EstimatorSpec
from traintime.chronos.convergence_protocols import evaluate, protocol_splits
from traintime.chronos.convergence_tables import (
    fmt_cell,
    per_model_table,
    summary_table,
)
from traintime.core.errors import UnknownNameError


def rows_with_groups(n: int = 60) -> pd.DataFrame:
    rows = synthetic_rows(n, seed=1)
    rows["raw_row"] = np.arange(1, n + 1)
    return rows


@pytest.mark.parametrize("protocol", ["cv", "lomo", "lodo"])
def test_splits_partition_rows_without_leaks(protocol):
    rows = rows_with_groups()
    splits = protocol_splits(rows, protocol, seed=5)
    tested = np.concatenate([s.test for s in splits])
    assert sorted(tested.tolist()) == list(range(len(rows)))  # every row tested exactly once
    for s in splits:
        assert not set(s.train) & set(s.test)
        assert set(rows.family.iloc[s.train]) == {s.family} == set(rows.family.iloc[s.test])  # within a family
        if protocol != "cv":
            col = "model" if protocol == "lomo" else "dataset"
            held = set(rows[col].iloc[s.test])
            assert held == {s.fold}
            assert s.fold not in set(rows[col].iloc[s.train])  # held-out group absent from training


def test_cv_depends_on_seed_and_group_protocols_do_not():
    rows = rows_with_groups()
    a = [s.test.tolist() for s in protocol_splits(rows, "cv", 1)]
    b = [s.test.tolist() for s in protocol_splits(rows, "cv", 2)]
    assert a != b
    assert [s.test.tolist() for s in protocol_splits(rows, "lomo", 1)] == \
        [s.test.tolist() for s in protocol_splits(rows, "lomo", 2)]


def test_unknown_protocol():
    with pytest.raises(UnknownNameError, match="lomo"):
        protocol_splits(rows_with_groups(), "lomoo")


def test_group_median_under_lomo_never_sees_the_held_out_model():
    rows = rows_with_groups()
    preds = evaluate(rows, ["group_median"], ["lomo"], [0])
    for (fam, model), g in preds.groupby(["family", "model"]):
        train = rows[(rows.family == fam) & (rows.model != model)]
        assert np.allclose(g.epochs_predicted, np.median(train.epochs_to_converge))


def test_evaluate_seeds_and_tables_hand_computed(monkeypatch):
    # a cheap stand-in for a seeded estimator (fake: test only)
    monkeypatch.setitem(ESTIMATORS, "fake_seeded",
                        EstimatorSpec("fake_seeded", "test fake", lambda rs, nj: ConstantPredictor("median"), True))
    rows = rows_with_groups(40)
    preds = evaluate(rows, ["constant_mean", "fake_seeded"], ["cv", "lodo"], [0, 1], group_protocol_seeds="first")
    counts = preds.groupby(["protocol", "method"])["seed"].nunique().to_dict()
    assert counts == {("cv", "fake_seeded"): 2, ("cv", "constant_mean"): 2,
                      ("lodo", "fake_seeded"): 1, ("lodo", "constant_mean"): 1}
    both = evaluate(rows, ["constant_mean", "fake_seeded"], ["lodo"], [0, 1], group_protocol_seeds="all")
    assert both.groupby("method")["seed"].nunique().to_dict() == {"constant_mean": 1, "fake_seeded": 2}
    # constant mean under cv: prediction = mean of the family's training fold
    d = preds[(preds.protocol == "cv") & (preds.method == "constant_mean") & (preds.seed == 0)]
    for s in protocol_splits(rows, "cv", 0):
        want = rows.epochs_to_converge.iloc[s.train].mean()
        got = d.set_index(["family", "raw_row"]).loc[list(zip(rows.family.iloc[s.test], rows.raw_row.iloc[s.test])),
                                                     "epochs_predicted"]
        assert np.allclose(got, want)
    pm = per_model_table(preds)
    sel = preds[(preds.protocol == "cv") & (preds.method == "constant_mean")]
    per_seed = [g[g.model == "m1"].ape_pct.mean() for _, g in sel.groupby("seed")]
    row = pm[(pm.protocol == "cv") & (pm.method == "constant_mean") & (pm.model == "m1")].iloc[0]
    assert row.mape_mean_pct == pytest.approx(np.mean(per_seed))
    assert row.mape_sd_pct == pytest.approx(np.std(per_seed, ddof=1))
    sm = summary_table(preds)
    pooled = [g.ape_pct.mean() for _, g in sel.groupby("seed")]
    srow = sm[(sm.protocol == "cv") & (sm.method == "constant_mean")].iloc[0]
    assert srow.pooled_mape_mean_pct == pytest.approx(np.mean(pooled))
    assert srow.n_seeds == 2


def test_fmt_cell():
    assert fmt_cell(12.345, 0.5, 5) == "12.35 +- 0.50"
    assert fmt_cell(12.345, 0.0, 1) == "12.35"
    assert fmt_cell(float("nan"), 0.0, 1) == ""
