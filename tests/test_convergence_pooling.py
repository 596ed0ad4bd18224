"""Partial-pooling baseline, pooled log-linear model and the monotone XGBoost on physical features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence import ESTIMATORS, make_estimator
from traintime.chronos.convergence_pooling import (
    DEFAULT_LR,
    FeatureXGB,
    PartialPooling,
    PooledLogLinear,
    physical_features,
)
from traintime.core.errors import SchemaError


def _rows(spec: list[tuple[str, str, str, float]]) -> tuple[pd.DataFrame, np.ndarray]:
    df = pd.DataFrame(spec, columns=["model", "dataset", "optimizer", "epochs"])
    return df.drop(columns="epochs"), df["epochs"].to_numpy(dtype=float)


def test_partial_pooling_shrinks_by_the_documented_rule() -> None:
    rows, y = _rows([("a", "x", "SGD", 10), ("a", "x", "SGD", 10), ("b", "x", "SGD", 1000), ("b", "y", "SGD", 100)])
    pp = PartialPooling(strength=1.0).fit(rows, y)
    root = np.median(np.log10(y))
    m_a = (2 * 1 + root) / 3          # model a: 2 runs at log10 = 1
    d_x = (3 * 1 + root) / 4          # dataset x: median of (1, 1, 3) = 1
    md_ax = (2 * 1 + 0.5 * (m_a + d_x)) / 3
    mdo = (2 * 1 + md_ax) / 3
    got = pp.predict_log10(rows.iloc[:1])[0]
    assert got == pytest.approx(mdo)
    assert pp.strength_ == 1.0
    # strength 0 is the plain group median
    assert PartialPooling(0.0).fit(rows, y).predict(rows.iloc[[2]])[0] == pytest.approx(1000)


def test_partial_pooling_falls_back_to_coarser_groups_for_an_unseen_model() -> None:
    rows, y = _rows([("a", "x", "SGD", 10)] * 3 + [("a", "y", "SGD", 40)] * 3 + [("b", "x", "SGD", 20)] * 3)
    pp = PartialPooling(strength=2.0).fit(rows, y)
    unseen = pd.DataFrame({"model": ["zzz"], "dataset": ["x"], "optimizer": ["SGD"]})
    # unseen model: the (model, dataset, optimizer) and (model, dataset) groups take their prior, the
    # model estimate is the root, so the result is the mean of root and the dataset-x estimate
    root = np.median(np.log10(y))
    d_x = (6 * np.median(np.log10([10, 10, 10, 20, 20, 20])) + 2 * root) / 8
    assert pp.predict_log10(unseen)[0] == pytest.approx(0.5 * (root + d_x))
    # a seen model on an unseen dataset falls back to that model's estimate, not the global one
    unseen_ds = pd.DataFrame({"model": ["b"], "dataset": ["new"], "optimizer": ["SGD"]})
    m_b = (3 * np.log10(20) + 2 * root) / 5
    assert pp.predict_log10(unseen_ds)[0] == pytest.approx(0.5 * (m_b + root))


def test_partial_pooling_inner_cv_picks_a_grid_strength_and_rejects_bad_input() -> None:
    rng = np.random.default_rng(0)
    spec = [(f"m{i % 3}", f"d{i % 2}", "SGD", float(rng.integers(5, 50))) for i in range(30)]
    rows, y = _rows(spec)
    pp = PartialPooling().fit(rows, y)
    assert pp.strength_ in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)
    with pytest.raises(SchemaError, match="positive"):
        PartialPooling(1.0).fit(rows, -y)
    with pytest.raises(SchemaError, match="lack column"):
        PartialPooling(1.0).fit(rows.drop(columns="dataset"), y)


def test_pooled_loglinear_recovers_within_group_slopes() -> None:
    recs = []
    for g, base in (("a", 1.0), ("b", 1.5)):
        for lr in (5e-4, 1e-3, 2e-3):
            for b in (32, 64, 128):
                recs.append(dict(model=g, dataset="x", optimizer="SGD", learning_rate=lr, batch_size=b,
                                 epochs=10 ** (base - 0.5 * np.log10(lr) + 0.3 * np.log10(b))))
    df = pd.DataFrame(recs)
    est = PooledLogLinear(strength=0.0, alpha=0.0).fit(df, df["epochs"])
    np.testing.assert_allclose(est.shared_slope_, [-0.5, 0.3], atol=1e-9)
    np.testing.assert_allclose(est.predict(df), df["epochs"], rtol=1e-9)


def test_physical_features_and_monotone_xgb() -> None:
    rows = pd.DataFrame({"model": ["resnet50", "mixer"], "optimizer": ["SGD", "AdamW"], "learning_rate": [0.01, 1e-3],
                         "batch_size": [100, 10], "dataset_size": [1000, 1000], "param_count": [10, 100],
                         "num_classes": [10, 100], "depth": [np.nan, 8]})
    f = physical_features(rows)
    assert f.loc[0, "lr_rel_log10"] == pytest.approx(np.log10(0.01 / DEFAULT_LR["SGD"]))
    assert f.loc[0, "depth"] == 50 and f.loc[1, "depth"] == 8
    assert f.loc[0, "steps_per_epoch_log10"] == pytest.approx(np.log10(8))
    # monotone in patience: more patience never predicts fewer epochs
    rng = np.random.default_rng(1)
    n = 80
    tr = pd.DataFrame({"model": "m", "optimizer": rng.choice(["SGD", "AdamW"], n),
                       "learning_rate": rng.choice([5e-4, 1e-3], n), "batch_size": rng.choice([32, 64], n),
                       "dataset_size": 5000, "param_count": 1000, "num_classes": 10,
                       "patience": rng.integers(2, 9, n)})
    y = 5 + 3 * tr["patience"] + rng.normal(0, 4, n).clip(-4, 4)
    est = FeatureXGB(True, random_state=0).fit(tr, y)
    grid = pd.concat([tr.iloc[[0]]] * 7, ignore_index=True).assign(patience=np.arange(2, 9))
    assert np.all(np.diff(est.predict(grid)) >= -1e-9)


def test_registered_in_estimators() -> None:
    for name in ("partial_pooling", "pooled_loglinear", "xgb_monotone", "xgb_probe", "pooled_or_xgb", "ntk_guided_per_model"):
        assert name in ESTIMATORS
        make_estimator(name)


def test_pooled_or_xgb_routes_unseen_models_to_the_feature_model() -> None:
    from traintime.chronos.convergence_pooling import SeenOrFeatures

    rng = np.random.default_rng(3)
    n = 60
    rows = pd.DataFrame({"model": rng.choice(["a", "b"], n), "dataset": "x", "optimizer": "SGD",
                         "learning_rate": rng.choice([1e-3, 2e-3], n), "batch_size": rng.choice([32, 64], n),
                         "dataset_size": 5000, "param_count": rng.choice([1000, 5000], n), "num_classes": 10})
    y = rng.integers(5, 40, n).astype(float)
    est = SeenOrFeatures(random_state=0).fit(rows, y)
    new = rows.iloc[:2].assign(model="unseen")
    np.testing.assert_allclose(est.predict(new), est.features_.predict(new))
    np.testing.assert_allclose(est.predict(rows.iloc[:2]), est.pooled_.predict(rows.iloc[:2]))


def test_ntk_guided_per_model_recovers_intercepts_and_slope() -> None:
    from traintime.chronos.convergence import NTKGuided
    from traintime.chronos.convergence_pooling import NTKGuidedPerModel

    rng = np.random.default_rng(5)
    n = 40
    rows = pd.DataFrame({"model": rng.choice(["a", "b"], n), "learning_rate": rng.choice([1e-3, 2e-3], n),
                         "ntk_trace_proxy_log10": rng.uniform(-1, 1, n), "dataset_size": rng.choice([1e4, 5e4], n),
                         "batch_size": rng.choice([32, 64], n)})
    s = NTKGuided.signal_log10(rows)
    z = np.where(rows["model"] == "a", 1.0, 1.5) - 0.2 * s
    est = NTKGuidedPerModel().fit(rows, 10 ** z)
    np.testing.assert_allclose(est.predict(rows), 10 ** z, rtol=1e-9)
    unseen = rows.iloc[:3].assign(model="c")
    np.testing.assert_allclose(est.predict(unseen), 10 ** est.plain_.predict(s[:3, None]), rtol=1e-9)
