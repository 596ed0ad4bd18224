"""Nested grouped CV (traintime.chronos.selection): no row of an outer test fold reaches any fit,
inner prediction or scoring step, for every grouped protocol (a spy model and a spy scorer record the
rows they see)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.evaluation import PREDICTION_COLUMNS, protocol_splits
from traintime.chronos.selection import (
    CHOICE_COLUMNS,
    Candidate,
    NestedSelector,
    candidates_from_config,
    fit_nested_predictor,
    inner_splits,
    mape_scorer,
    nested_evaluate,
)
from traintime.core.errors import ConfigError, SchemaError

SELECTION = {"feature_sets": ["clean", "clean_roofline"], "target_transforms": ["log"], "estimators": ["xgboost"],
             "grid": {"xgboost": [{}, {"max_depth": 6}]}, "inner_max_folds": 5}


def synthetic_table() -> pd.DataFrame:
    """3 models x 3 datasets x 4 GPUs x 2 learning-rate replicates of one family (CNN)."""
    rows = []
    for i, (m, d, g, lr) in enumerate(itertools.product(range(3), range(3), range(4), (1e-3, 1e-2))):
        rows.append(dict(family="CNN", status="ok", raw_row=i, row_id=f"CNN:{i:05d}", model=f"m{m}",
                         dataset=f"d{d}", gpu=f"g{g}", config_key=f"CNN|m{m}|d{d}|g{g}", learning_rate=lr,
                         step_time_ms=10.0 * (1 + m) * (1 + 0.5 * d) / (1 + g)))
    return pd.DataFrame(rows)


class SpyModel:
    """Records the row ids of every fit and predict; predicts the training mean x a per-candidate factor."""

    def __init__(self, cand: Candidate, events: list) -> None:
        self.cand, self.events = cand, events
        self.factor = 1.0 if cand.feature_set == "clean_roofline" and not cand.params else 1.3

    def fit(self, rows: pd.DataFrame, y) -> "SpyModel":
        self.events.append(("fit", frozenset(rows["row_id"])))
        self.mean_ = float(np.mean(y))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        self.events.append(("predict", frozenset(rows["row_id"])))
        return np.full(len(rows), self.mean_ * self.factor)


def spies():
    events: list = []

    def factory(cand, family, seed, categories):
        events.append(("vocabulary", frozenset(categories["model"]) | frozenset(categories["dataset"])))
        return SpyModel(cand, events)

    def scorer(rows, y_true, y_pred):
        events.append(("score", frozenset(rows["row_id"])))
        return mape_scorer(rows, y_true, y_pred)

    return events, factory, scorer


@pytest.mark.parametrize("protocol, column", [("logo", "gpu"), ("lomo", "model"), ("lodo", "dataset")])
def test_outer_test_rows_never_reach_fit_or_selection(protocol, column):
    table = synthetic_table()
    events, factory, scorer = spies()
    res = nested_evaluate(table, "CNN", protocol, seed=0, selection=SELECTION, model_factory=factory, scorer=scorer)
    splits = protocol_splits(protocol, table.reset_index(drop=True))
    assert len(splits) == table[column].nunique()
    pos = 0
    for fold, tr, te in splits:
        test_ids = frozenset(table["row_id"].iloc[te])
        train_ids = frozenset(table["row_id"].iloc[tr])
        held_out = set(table[column].iloc[te])
        assert held_out == {fold}
        # walk this fold's events up to the one prediction of the outer test rows
        last_fit = None
        while True:
            kind, ids = events[pos]
            pos += 1
            if kind == "predict" and ids == test_ids:
                break
            if kind == "vocabulary":  # categories come from the outer-training rows only
                assert not ({fold} & ids) or column == "gpu", (protocol, fold, ids)
                continue
            assert not (ids & test_ids), f"{protocol} fold {fold}: a {kind} step saw outer test rows"
            assert ids <= train_ids
            if kind == "fit":
                last_fit = ids
        assert last_fit == train_ids  # the choice is refitted on the whole outer-training fold
    assert pos == len(events)
    # scoring happened, on inner held-out parts that are whole groups of the same kind
    scored = [ids for kind, ids in events if kind == "score"]
    assert scored and all(table.set_index("row_id").loc[list(ids), column].nunique() >= 1 for ids in scored)
    # output format of the existing evaluation, one row per outer test row
    p = res.predictions
    assert list(p.columns) == PREDICTION_COLUMNS and len(p) == len(table)
    assert set(p["feature_set"]) == set(p["estimator"]) == {"nested"} and p["row_id"].is_unique
    assert set(p["fold"]) == set(table[column])
    c = res.choices
    assert list(c.columns) == CHOICE_COLUMNS
    chosen = c[c["chosen"]]
    assert len(chosen) == len(splits) and set(chosen["candidate"]) == {"clean_roofline/log/xgboost"}


def test_inner_folds_are_groups_of_the_outer_kind():
    t = synthetic_table()
    for tr, va in inner_splits(t, "gpu", max_folds=5):  # 4 GPUs: leave one GPU out
        assert t["gpu"].iloc[va].nunique() == 1 and not set(t["gpu"].iloc[va]) & set(t["gpu"].iloc[tr])
    folds = inner_splits(t, "config_key", max_folds=5)  # 36 configurations: grouped 5-fold
    assert len(folds) == 5
    for tr, va in folds:
        assert not set(t["config_key"].iloc[va]) & set(t["config_key"].iloc[tr])
    with pytest.raises(SchemaError, match="at least 2"):
        inner_splits(t[t["gpu"] == "g0"], "gpu")


def test_random_protocol_uses_grouped_inner_folds():
    events, factory, scorer = spies()
    res = nested_evaluate(synthetic_table(), "CNN", "grouped_random", seed=3, selection=SELECTION,
                          model_factory=factory, scorer=scorer)
    assert set(res.predictions["fold"]) == {"test"} and res.choices["n_inner_folds"].iloc[0] == 5


def test_candidates_from_config():
    c = candidates_from_config(SELECTION)
    assert [x.name for x in c] == ["clean/log/xgboost", "clean/log/xgboost[max_depth=6]",
                                   "clean_roofline/log/xgboost", "clean_roofline/log/xgboost[max_depth=6]"]
    # clean_roofline regresses a log offset: no identity transform; paper sets take no log transform
    c2 = candidates_from_config({**SELECTION, "feature_sets": ["paper", "clean_roofline"],
                                 "target_transforms": ["identity"], "grid": {}})
    assert [x.name for x in c2] == ["paper/identity/xgboost"]
    with pytest.raises(ConfigError, match="estimator"):
        candidates_from_config({**SELECTION, "estimators": ["xgbost"]})


@pytest.mark.slow
def test_real_rows_nested_lomo_and_saved_predictor(mirror):
    """The default factory (real features and XGBoost, few trees) on a slice of the released Transformer
    rows (~15 s on 2 cores)."""
    from traintime.data.chronos import FAMILIES, normalise_iteration

    table = normalise_iteration({f: mirror / "chronos/epoch_time_prediction/data" / f"{f}.csv" for f in FAMILIES})
    small = table.iloc[::25]
    sel = {**SELECTION, "grid": {"xgboost": [{}]}, "inner_max_folds": 3}
    res = nested_evaluate(small, "Transformer", "lomo", seed=42, selection=sel, n_estimators_scale=0.03,
                          clean_options={"log_target": True})
    n = int(((small["family"] == "Transformer") & (small["status"] == "ok")).sum())
    assert len(res.predictions) == n and np.isfinite(res.predictions["y_pred_ms"]).all()
    assert res.choices.groupby("fold")["chosen"].sum().eq(1).all()
    pred = fit_nested_predictor(small, ["Transformer"], "lomo", 42, sel, n_estimators_scale=0.03,
                                clean_options={"log_target": True})
    fam = pred.metadata["families"]["Transformer"]
    assert fam["chosen"] in fam["inner_scores_mape_pct"] and fam["inner_group"] == "model"
    rows = small[small["family"] == "Transformer"].head(5)
    assert (pred.predict(rows) > 0).all()


def test_selector_params_and_unfitted_choice():
    s = NestedSelector(candidates_from_config(SELECTION), "CNN", "gpu")
    assert s.get_params()["group_column"] == "gpu" and not hasattr(s, "best_")


def test_config_default_selection_matches_the_library_default(repo_root):
    from traintime.chronos.selection import DEFAULT_SELECTION
    from traintime.core.config import load_config, validate_config

    schema = repo_root / "schemas" / "config.schema.yaml"
    assert validate_config({}, schema)["chronos_iteration"]["selection"] == DEFAULT_SELECTION
    cfg = load_config(repo_root / "config.yaml", schema)
    # config.yaml's one budget override of the selection (its comment gives the by-hand comparison)
    assert cfg["chronos_iteration"]["selection"] == {**DEFAULT_SELECTION, "inner_n_estimators_scale": 0.25}
    assert cfg["emulation"]["mapping_max_sm_distance"] == 0.10


def test_tree_counts_of_the_grid_are_scaled_for_inner_fits_only():
    cand = Candidate("clean", "log", "xgboost", (("learning_rate", 0.2), ("n_estimators", 200)))
    sel = NestedSelector([cand], "CNN", "gpu", inner_n_estimators_scale=0.5, n_estimators_scale=0.1)
    cats = {"model": ["m0"], "dataset": ["d0"], "optimizer": ["SGD"]}
    assert sel._make(cand, cats, inner=True).estimator.get_params()["n_estimators"] == 10
    refit = sel._make(cand, cats).estimator.get_params()
    assert refit["n_estimators"] == 20 and refit["learning_rate"] == 0.2
