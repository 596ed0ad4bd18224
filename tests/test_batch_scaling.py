"""The batch-scaling diagnostic: the exponent of a network's measured time in batch and the errors per class
(traintime.predict_step_grouped.errors_by_batch_scaling)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.batch_scaling import CLASSES, batch_exponent, batch_scaling_class
from traintime.predict_step_grouped import errors_by_batch_scaling


def rows() -> pd.DataFrame:
    """Synthetic rows (labelled synthetic: no measurement): network a grows linearly with batch on GPU g1, network b
    takes 20 ms at every batch (host-bound), network c was measured at one batch only."""
    recs = []
    for b in (16, 64):
        for rep in range(2):
            recs.append({"source": "s", "gpu": "g1", "model": "a", "img_px": 224, "precision": "32", "batch_size": b,
                         "measured_ms": 0.5 * b})
            recs.append({"source": "s", "gpu": "g1", "model": "b", "img_px": 224, "precision": "32", "batch_size": b,
                         "measured_ms": 20.0})
    recs.append({"source": "s", "gpu": "g1", "model": "c", "img_px": 224, "precision": "32", "batch_size": 32,
                 "measured_ms": 5.0})
    return pd.DataFrame(recs)


def test_exponent_is_one_for_work_that_grows_with_batch_and_zero_for_a_fixed_step() -> None:
    d = rows()
    s = batch_exponent(d)
    np.testing.assert_allclose(s[d["model"] == "a"], 1.0)
    np.testing.assert_allclose(s[d["model"] == "b"], 0.0, atol=1e-12)
    assert s[d["model"] == "c"].isna().all()
    cls = batch_scaling_class(d)
    assert set(cls[d["model"] == "a"]) == {CLASSES[2]}
    assert set(cls[d["model"] == "b"]) == {CLASSES[0]}
    assert set(cls[d["model"] == "c"]) == {CLASSES[3]}


def test_errors_are_split_by_class_with_shares_that_add_up() -> None:
    d = rows()
    y = d["measured_ms"].to_numpy()
    p = np.where(d["model"].eq("b"), 2.0 * y, y)  # the host-bound network predicted twice too slow
    pred = pd.DataFrame({"protocol": "chronos LOGO", "method": "m", "row": np.arange(len(d)), "pred_ms": p})
    t = errors_by_batch_scaling(d, pred).set_index("batch_scaling")
    assert t["share_pct"].sum() == pytest.approx(100.0)
    assert t.loc[CLASSES[0], "mape_pct"] == pytest.approx(100.0)
    assert t.loc[CLASSES[2], "mape_pct"] == pytest.approx(0.0)
    assert t.loc[CLASSES[0], "geo_mean_pred_over_measured"] == pytest.approx(2.0)
    assert errors_by_batch_scaling(d, pred, protocols=("traces LOGO",)).empty
