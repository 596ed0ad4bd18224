"""Step time from two labels on grouped folds: the loader model never sees the held-out group, the labels add,
and the target verdict follows the interval over seeds (synthetic rows, no measurement)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import traintime.chronos.two_label as tl
from traintime.core.errors import SchemaError

FITS: list[pd.DataFrame] = []


class SpyLoader:
    """Records its training rows; predicts their mean wait plus the seed (so seeds differ)."""

    def __init__(self, random_state: int = 0) -> None:
        self.random_state = random_state

    def fit(self, rows: pd.DataFrame, y) -> SpyLoader:
        FITS.append(rows.copy())
        self.mean_ = float(np.mean(y)) + self.random_state
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.full(len(rows), self.mean_)


def _iteration() -> pd.DataFrame:
    recs = []
    for i, (gpu, model, dataset) in enumerate([(g, m, d) for g in ("T4", "V100", "A100") for m in ("m1", "m2")
                                               for d in ("d1", "d2")]):
        compute, loader = 10.0 + i, 2.0
        recs.append({"row_id": f"CNN:{i:05d}", "status": "ok", "gpu": gpu, "model": model, "dataset": dataset,
                     "input_px": 32, "batch_size": 64, "dataset_size": 50000, "provider": "p",
                     "compute_time_ms": compute, "loader_wait_ms": loader, "step_time_ms": compute + loader})
    return pd.DataFrame(recs)


def _compute(it: pd.DataFrame) -> pd.DataFrame:
    """Perfect compute predictions on every CHRONOS protocol (the loader half is what is tested)."""
    return pd.concat([pd.DataFrame({"protocol": p, "fold": it[by], "method": "neighbour", "row_id": it["row_id"],
                                    "pred_ms": it["compute_time_ms"]}) for p in tl.PROTOCOLS for by in [tl.group_column(p)]])


def test_loader_model_never_fits_the_held_out_group_and_labels_add(monkeypatch) -> None:
    monkeypatch.setattr(tl, "LoaderWaitRegressor", SpyLoader)
    it = _iteration()
    FITS.clear()
    pred = tl.two_label_predictions(it, _compute(it), seeds=[0, 1])
    groups = {"gpu": 3, "model": 2, "dataset": 2}
    assert len(FITS) == 2 * sum(groups.values())  # one fit per held-out group and seed
    i = 0
    for by in map(tl.group_column, tl.PROTOCOLS):
        held = sorted(it[by].unique())
        for g in held:
            for _ in (0, 1):
                assert g not in set(FITS[i][by]) and len(FITS[i]) == (it[by] != g).sum()
                i += 1
    np.testing.assert_allclose(pred["pred_step_ms"], pred["pred_compute_ms"] + pred["pred_loader_ms"])
    # every wait is 2 ms, the spy adds the seed: seed 0 is exact, seed 1 is 1 ms too slow
    s = tl.summarise(it, pred)
    assert set(s["protocol"]) == set(tl.PROTOCOLS) and (s["n_seeds"] == 2).all()
    assert (s["compute_mape_pct"] == 0).all() and np.allclose(s["loader_mae_ms"], 0.5)
    seed1 = np.mean(100.0 / it["step_time_ms"])  # 1 ms too slow on every row
    np.testing.assert_allclose(s["step_mape_pct_mean"], seed1 / 2)
    assert (s["meets_target"] == "inconclusive").all()  # two seeds: the t interval straddles every target


def test_previous_models_and_unknown_rows() -> None:
    it = _iteration()
    prev = pd.DataFrame({"feature_set": ["clean", "clean", "paper"], "estimator": ["xgboost", "xgboost", "xgboost"],
                         "seed": [0, 1, 0], "row_id": it["row_id"].iloc[:3], "y_pred_ms": [12.0, 13.0, 99.0]})
    p = tl.previous_predictions({"logo": prev})
    assert set(p["method"]) == {"previous: xgboost on step_time_ms"} and list(p["pred_step_ms"]) == [12.0, 13.0]
    assert set(p["protocol"]) == {"chronos LOGO"}
    bad = _compute(it).assign(row_id="nope")
    with pytest.raises(SchemaError, match="not in the iteration table"):
        tl.two_label_predictions(it, bad, seeds=[0])


@pytest.mark.parametrize("mean,low,high,verdict", [(20.0, 18.0, 22.0, "yes"), (30.0, 28.0, 32.0, "no"),
                                                   (25.0, 20.0, 30.0, "inconclusive"), (24.0, np.nan, np.nan, "yes")])
def test_target_verdict_follows_the_interval(mean, low, high, verdict) -> None:
    assert tl.meets(mean, low, high, 25.0) == verdict


def test_per_held_out_dataset_shows_a_loader_wait_no_other_dataset_has(monkeypatch) -> None:
    """Dataset d2 waits 20 ms for its loader, d1 2 ms: held out, d2 gets d1's wait from the spy (fitted on d1 only),
    so its step error is all loader; with the measured wait the perfect compute predictions leave 0 %."""
    monkeypatch.setattr(tl, "LoaderWaitRegressor", SpyLoader)
    it = _iteration()
    slow = it["dataset"] == "d2"
    it.loc[slow, "loader_wait_ms"] = 20.0
    it["step_time_ms"] = it["compute_time_ms"] + it["loader_wait_ms"]
    pred = tl.two_label_predictions(it, _compute(it), seeds=[0])
    g = tl.per_group(it, pred).set_index("held_out")
    assert list(g.index) == ["d1", "d2"] and (g["protocol"] == "chronos LODO").all() and (g["rows"] == 6).all()
    assert (g["compute_mape_pct"] == 0).all() and (g["step_mape_pct_measured_loader"] == 0).all()
    assert g.loc["d2", "loader_wait_ms_measured_median"] == 20.0 and g.loc["d2", "loader_wait_ms_predicted_median"] == 2.0
    np.testing.assert_allclose(g.loc["d2", "step_mape_pct"], np.mean(18.0 / it.loc[slow, "step_time_ms"]) * 100)
    np.testing.assert_allclose(g.loc["d1", "step_mape_pct"], np.mean(18.0 / it.loc[~slow, "step_time_ms"]) * 100)
    assert tl.per_group(it, pred.iloc[0:0]).empty
