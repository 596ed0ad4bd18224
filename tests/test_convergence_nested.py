"""The nested convergence choice: no outer test row reaches a fit or a choice; inner folds of the outer kind."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, RegressorMixin
from test_convergence_protocols import rows_with_groups

from traintime.chronos.convergence import (
    ESTIMATORS,
    TARGET,
    EstimatorSpec,
    make_estimator,
)
from traintime.chronos.convergence_nested import (
    INNER_GROUP,
    NestedConvergence,
    configure_nested,
)
from traintime.chronos.convergence_protocols import (
    PREDICTIONS,
    evaluate,
    protocol_splits,
)
from traintime.chronos.convergence_seed_tables import nested_choices_note
from traintime.core.errors import ConfigError, UnknownNameError

FITS: list[tuple[str, frozenset[int]]] = []


class _Spy(BaseEstimator, RegressorMixin):
    """Records the released row ids of every fit; predicts its training median times ``scale``."""

    def __init__(self, tag: str = "a", scale: float = 1.0) -> None:
        self.tag = tag
        self.scale = scale

    def fit(self, rows: pd.DataFrame, y: np.ndarray) -> _Spy:
        FITS.append((self.tag, frozenset(int(r) for r in rows["raw_row"])))
        self.m_ = float(np.median(y)) * self.scale
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.full(len(rows), self.m_)


@pytest.fixture
def spies(monkeypatch):
    """Two spy estimators registered by name: ``spy_good`` (the median) and ``spy_bad`` (three times it)."""
    FITS.clear()
    monkeypatch.setitem(ESTIMATORS, "spy_good", EstimatorSpec("spy_good", "spy", lambda rs, nj: _Spy("good"), False))
    monkeypatch.setitem(ESTIMATORS, "spy_bad", EstimatorSpec("spy_bad", "spy", lambda rs, nj: _Spy("bad", 3.0), False))
    return ["spy_bad", "spy_good"]


@pytest.mark.parametrize("protocol", ["cv", "lomo", "lodo"])
def test_no_outer_test_row_reaches_a_fit_and_inner_folds_are_of_the_outer_kind(spies, protocol):
    rows = _three_datasets()
    y = rows[TARGET].to_numpy(dtype=float)
    for split in protocol_splits(rows, protocol, seed=3):
        FITS.clear()
        train = rows.iloc[split.train]
        est = configure_nested(make_estimator("nested", random_state=3, per_family=False), protocol, spies)
        est.fit(train, y[split.train])
        test_ids = set(rows["raw_row"].iloc[split.test].astype(int))
        train_ids = frozenset(train["raw_row"].astype(int))
        assert FITS and all(not (ids & test_ids) for _, ids in FITS)  # nothing of the outer test fold
        assert est.choice_ == "spy_good"  # the inner folds decide: the median beats three times it
        *inner, refit = FITS
        assert refit == ("good", train_ids)  # the choice refitted on every outer-training row
        assert len(inner) == 2 * est.n_inner_folds_
        col = INNER_GROUP[protocol]
        for _, ids in inner:  # each inner fit leaves out whole groups of the outer protocol's kind
            assert ids < train_ids
            if col != "run_key":
                left = train[~train["raw_row"].astype(int).isin(ids)]
                kept = train[train["raw_row"].astype(int).isin(ids)]
                assert not set(left[col]) & set(kept[col])


def _three_datasets() -> pd.DataFrame:
    rows = rows_with_groups()
    rows["dataset"] = np.resize(["d1", "d2", "d3"], len(rows))  # LODO's outer training keeps two datasets
    return rows


def test_one_group_left_fits_the_first_candidate(spies):
    rows = rows_with_groups()
    rows = rows[rows["dataset"] == "d1"]
    est = NestedConvergence(candidates=spies, inner_group="dataset").fit(rows, rows[TARGET].to_numpy(float))
    assert est.choice_ == "spy_bad" and est.n_inner_folds_ == 0 and FITS == [("bad", frozenset(rows["raw_row"]))]
    np.testing.assert_allclose(est.predict(rows), 3 * np.median(rows[TARGET]))


def test_evaluate_nested_scores_the_choice_on_outer_folds(spies):
    rows = rows_with_groups()
    out = evaluate(rows, ["nested", "spy_good"], ["lomo"], [0], nested_candidates=spies)
    nested = out[out["method"] == "nested"]["epochs_predicted"].to_numpy()
    good = out[out["method"] == "spy_good"]["epochs_predicted"].to_numpy()
    np.testing.assert_allclose(nested, good)
    assert set(out.loc[out["method"] == "nested", "chosen"]) == {"spy_good"}  # the choice of every outer fold
    assert out.loc[out["method"] == "spy_good", "chosen"].isna().all()
    checked = PREDICTIONS.validate(out[out["method"] == "nested"])  # the spies are not registered estimators
    assert "chosen" in checked.columns
    note = nested_choices_note(out)
    folds = out[out["method"] == "nested"].drop_duplicates(["family", "held_out"]).shape[0]
    assert f"lomo: spy_good {folds} of {folds}" in note


def test_bad_candidates_are_named():
    rows = rows_with_groups()
    y = rows[TARGET].to_numpy(dtype=float)
    with pytest.raises(UnknownNameError, match="partial_poolin"):
        NestedConvergence(candidates=("partial_poolin",)).fit(rows, y)
    with pytest.raises(UnknownNameError, match="nested"):
        NestedConvergence(candidates=("nested",)).fit(rows, y)
    with pytest.raises(ConfigError, match="no candidates"):
        NestedConvergence(candidates=()).fit(rows, y)
    with pytest.raises(UnknownNameError, match="protocol"):
        configure_nested(make_estimator("nested"), "logo")


def test_configure_nested_leaves_other_estimators_alone():
    est = make_estimator("partial_pooling")
    before = {k: v for k, v in est.get_params().items() if k != "estimator"}
    assert configure_nested(est, "lomo", ["x"]) is est
    assert {k: v for k, v in est.get_params().items() if k != "estimator"} == before
