"""Evaluation protocols for the step-time regressors: splitters and the per-family runner.

Protocols (:data:`PROTOCOLS`); every fit is per family, as in the released code:

``random``
    The released 80/10/10 split: ``train_test_split(test_size=0.1, random_state=seed)`` on the
    family's rows in file order, then 1/9 of the remainder as a validation set that is computed and
    never used; metrics on the 10% test rows. Training rows keep the shuffled order the released
    code passes to XGBoost. The learning-rate replicates of a configuration straddle train and test.
``grouped_random``
    Same proportions, but whole configurations (``config_key``: the three learning-rate replicates)
    go to one side (``GroupShuffleSplit``): no replicate of a test row is in training.
``lomo`` / ``lodo`` / ``logo``
    Leave one model / dataset / GPU out (``LeaveOneGroupOut`` on ``model`` / ``dataset`` / ``gpu``):
    4+3+3 models, 4+3+5 datasets and 10+10+10 GPUs over CNN/MLP/Transformer. The split does not
    depend on the seed; the seed only changes the regressor's randomness.

:func:`evaluate_family` runs feature sets x estimators x seeds for one family and protocol and returns
one row per test prediction.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import (
    GroupShuffleSplit,
    LeaveOneGroupOut,
    train_test_split,
)
from threadpoolctl import threadpool_limits

from traintime.chronos.estimators import (
    IterationTimeModel,
    IterationTimePredictor,
    make_estimator,
)
from traintime.chronos.features import (
    CLEAN_FEATURE_SETS,
    make_feature_builder,
    shared_rows,
    vocabulary,
)
from traintime.core.errors import SchemaError, unknown_name
from traintime.data.chronos import FAMILIES, ITERATION_TARGET

log = logging.getLogger(__name__)


class _OneFold8010Split:
    """Shared parameters of the one-fold 80/10/10 splitters (scikit-learn splitter interface)."""

    def __init__(self, test_size: float = 0.10, val_size: float = 1 / 9, random_state: int = 42) -> None:
        self.test_size = test_size
        self.val_size = val_size
        self.random_state = random_state

    def get_n_splits(self, X: Any = None, y: Any = None, groups: Any = None) -> int:
        return 1


class PaperRandomSplit(_OneFold8010Split):
    """The released 80/10/10 row split (one fold). ``split`` yields ``(train, test)`` positions;
    ``validation_`` keeps the unused validation positions of the last split."""

    def split(self, X: Any, y: Any = None, groups: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        idx = np.arange(len(X))
        rem, test = train_test_split(idx, test_size=self.test_size, random_state=self.random_state, shuffle=True)
        train, val = train_test_split(rem, test_size=self.val_size, random_state=self.random_state, shuffle=True)
        self.validation_ = np.asarray(val)
        yield np.asarray(train), np.asarray(test)


class GroupedRandomSplit(_OneFold8010Split):
    """80/10/10 by groups (one fold): ``GroupShuffleSplit`` for the 10% test groups, then 1/9 of the
    remaining groups as (unused) validation. No group is on two sides."""

    def split(self, X: Any, y: Any = None, groups: Any = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        if groups is None:
            raise ValueError("GroupedRandomSplit needs groups")
        g = np.asarray(groups)
        idx = np.arange(len(X))
        outer = GroupShuffleSplit(n_splits=1, test_size=self.test_size, random_state=self.random_state)
        rem, test = next(outer.split(idx, groups=g))
        inner = GroupShuffleSplit(n_splits=1, test_size=self.val_size, random_state=self.random_state)
        tr, va = next(inner.split(rem, groups=g[rem]))
        self.validation_ = rem[va]
        yield rem[tr], test


@dataclass(frozen=True)
class Protocol:
    name: str
    group_column: str | None
    seeded_split: bool
    description: str


PROTOCOLS: dict[str, Protocol] = {
    "random": Protocol("random", None, True, "released 80/10/10 row split (learning-rate replicates straddle)"),
    "grouped_random": Protocol("grouped_random", "config_key", True,
                               "80/10/10 by configuration (replicates never straddle)"),
    "lomo": Protocol("lomo", "model", False, "leave one model out"),
    "lodo": Protocol("lodo", "dataset", False, "leave one dataset out"),
    "logo": Protocol("logo", "gpu", False, "leave one GPU out"),
}


#: protocols whose folds are held-out groups (model, dataset, GPU)
GROUPED_PROTOCOLS: tuple[str, ...] = ("lomo", "lodo", "logo")


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise unknown_name("protocol", name, PROTOCOLS)
    return PROTOCOLS[name]


def protocol_splits(protocol: str, rows: pd.DataFrame, seed: int = 42) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """``(fold name, train positions, test positions)`` of ``rows`` (one family, file order).

    Fold names: ``test`` for the random splits, the held-out group otherwise.
    """
    p = get_protocol(protocol)
    if p.name == "random":
        return [("test", tr, te) for tr, te in PaperRandomSplit(random_state=seed).split(rows)]
    groups = rows[p.group_column].astype(str).to_numpy()
    if p.name == "grouped_random":
        return [("test", tr, te) for tr, te in GroupedRandomSplit(random_state=seed).split(rows, groups=groups)]
    out = []
    for tr, te in LeaveOneGroupOut().split(rows, groups=groups):
        out.append((str(groups[te[0]]), tr, te))
    return out


PREDICTION_COLUMNS = ["family", "protocol", "feature_set", "estimator", "seed", "fold", "row_id", "model",
                      "dataset", "gpu", "y_true_ms", "y_pred_ms"]


def build_model(feature_set: str, estimator: str, family: str, seed: int,
                categories: Mapping[str, Sequence[str]] | None = None, n_jobs: int = 1,
                n_estimators_scale: float = 1.0, clean_options: Mapping[str, Any] | None = None) -> IterationTimeModel:
    """Unfitted :class:`IterationTimeModel`. ``clean_options``: ``log_target``,
    ``use_provider``, ``log_features``, ``specs`` for the clean set (the paper sets never use them)."""
    opts = dict(clean_options or {})
    clean = feature_set in CLEAN_FEATURE_SETS
    log_target = bool(opts.pop("log_target", False)) and clean
    feats = make_feature_builder(feature_set, family, categories=categories, **(opts if clean else {}))
    est = make_estimator(estimator, family, seed=seed, n_jobs=n_jobs, n_estimators_scale=n_estimators_scale)
    return IterationTimeModel(feats, est, log_target=log_target)


def family_rows(table: pd.DataFrame, family: str, max_rows: int | None = None) -> pd.DataFrame:
    """The ``ok`` rows of ``family`` in file order (``raw_row``), index reset; ``max_rows`` (tests
    only) keeps that many evenly spaced rows. No row: :class:`SchemaError`."""
    if family not in FAMILIES:
        raise unknown_name("model family", family, FAMILIES)
    rows = table[(table["family"] == family) & (table["status"] == "ok")]
    if "raw_row" in rows:
        rows = rows.sort_values("raw_row", kind="mergesort")
    rows = rows.reset_index(drop=True)
    if max_rows is not None and len(rows) > max_rows:
        rows = rows.iloc[np.linspace(0, len(rows) - 1, max_rows).round().astype(int)].reset_index(drop=True)
    if rows.empty:
        raise SchemaError(f"iteration table: no rows of family {family!r}")
    return rows


#: estimator entry of ``protocol_settings`` that runs nested grouped CV (traintime.chronos.selection)
NESTED_ENTRY = "nested"


def evaluate_family_nested(table: pd.DataFrame, family: str, protocol: str, feature_sets: Sequence[str],
                           estimators: Sequence[str], seeds: Sequence[int], n_jobs: int = 1,
                           n_estimators_scale: float = 1.0, clean_options: Mapping[str, Any] | None = None,
                           max_rows: int | None = None, selection: Mapping[str, Any] | None = None
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`evaluate_family` where ``estimators`` may also hold :data:`NESTED_ENTRY`: that entry runs
    :func:`traintime.chronos.selection.nested_evaluate` (candidates from ``selection``; its rows have
    ``feature_set`` = ``estimator`` = ``nested``, independent of ``feature_sets``) on the same folds and seeds.
    Returns (predictions, choices per outer fold: :data:`traintime.chronos.selection.CHOICE_COLUMNS`)."""
    from traintime.chronos.selection import CHOICE_COLUMNS, nested_evaluate

    fixed = [e for e in estimators if e != NESTED_ENTRY]
    parts, choices = [], []
    if fixed:
        parts.append(evaluate_family(table, family, protocol, feature_sets, fixed, seeds, n_jobs=n_jobs,
                                     n_estimators_scale=n_estimators_scale, clean_options=clean_options,
                                     max_rows=max_rows))
    if NESTED_ENTRY in estimators:
        opts = {k: v for k, v in dict(clean_options or {}).items() if k != "log_target"}  # a candidate's choice
        for seed in seeds:
            res = nested_evaluate(table, family, protocol, int(seed), selection, clean_options=opts, n_jobs=n_jobs,
                                  n_estimators_scale=n_estimators_scale, max_rows=max_rows)
            parts.append(res.predictions)
            choices.append(res.choices)
    out = pd.concat(parts, ignore_index=True)[PREDICTION_COLUMNS]
    ch = pd.concat(choices, ignore_index=True) if choices else pd.DataFrame(columns=CHOICE_COLUMNS)
    return out, ch[CHOICE_COLUMNS]


def evaluate_family(table: pd.DataFrame, family: str, protocol: str, feature_sets: Sequence[str],
                    estimators: Sequence[str], seeds: Sequence[int], n_jobs: int = 1,
                    n_estimators_scale: float = 1.0, clean_options: Mapping[str, Any] | None = None,
                    max_rows: int | None = None) -> pd.DataFrame:
    """Test predictions of every (feature set, estimator, seed, fold) of ``protocol`` on ``family``.

    ``table`` is the canonical iteration table (rows with ``status == ok`` are used, in file
    order). Category vocabularies come from the whole family (names only), as the released code's
    dummies do. ``max_rows`` (tests only) keeps every k-th row. Returns :data:`PREDICTION_COLUMNS`.
    """
    get_protocol(protocol)
    rows = family_rows(table, family, max_rows)
    cats = vocabulary(rows)
    y_all = rows[ITERATION_TARGET].to_numpy(dtype=float)
    seed_split = get_protocol(protocol).seeded_split
    parts = []
    fixed_splits = None if seed_split else protocol_splits(protocol, rows)
    # BLAS threads beyond n_jobs only slow the small MLP matrices down (and oversubscribe the cores)
    with threadpool_limits(limits=max(1, n_jobs)), shared_rows(rows):  # every fold's features from one build
        for seed in seeds:
            parts.extend(_run_seed(rows, y_all, family, protocol, feature_sets, estimators, int(seed),
                                   protocol_splits(protocol, rows, seed) if seed_split else fixed_splits,
                                   cats, n_jobs, n_estimators_scale, clean_options))
    out = pd.concat(parts, ignore_index=True)
    return out.sort_values(["feature_set", "estimator", "seed", "fold", "row_id"], kind="mergesort")\
        .reset_index(drop=True)[PREDICTION_COLUMNS]


def _run_seed(rows: pd.DataFrame, y_all: np.ndarray, family: str, protocol: str, feature_sets: Sequence[str],
              estimators: Sequence[str], seed: int, splits: Any, cats: Mapping[str, Sequence[str]], n_jobs: int,
              n_estimators_scale: float, clean_options: Mapping[str, Any] | None) -> list[pd.DataFrame]:
    """Fit and predict every (fold, feature set, estimator) of one seed."""
    parts = []
    for fold, tr, te in splits:
        train, test = rows.iloc[tr], rows.iloc[te]
        for fs in feature_sets:
            for est in estimators:
                t0 = time.perf_counter()
                model = build_model(fs, est, family, seed, categories=cats, n_jobs=n_jobs,
                                    n_estimators_scale=n_estimators_scale, clean_options=clean_options)
                model.fit(train, y_all[tr])
                pred = model.predict(test)
                log.info("%s %s %s %s seed=%d fold=%s: %d train, %d test rows, %.1f s", family, protocol, fs,
                         est, seed, fold, len(tr), len(te), time.perf_counter() - t0)
                parts.append(pd.DataFrame({
                    "family": family, "protocol": protocol, "feature_set": fs, "estimator": est,
                    "seed": seed, "fold": fold, "row_id": test["row_id"].to_numpy(),
                    "model": test["model"].to_numpy(), "dataset": test["dataset"].to_numpy(),
                    "gpu": test["gpu"].to_numpy(), "y_true_ms": y_all[te], "y_pred_ms": pred,
                }))
    return parts


def cv_summary(predictions: pd.DataFrame, feature_set: str, estimator: str,
               family: str | None = None) -> dict[str, dict[str, float | int]]:
    """Cross-validated MAPE of (feature set, estimator) per protocol from test predictions:
    pooled MAPE (mean, sd over seeds) and the mean per-group MAPE (held-out group, or model for
    the random splits)."""
    from traintime.core.metrics import mape, mean_sd

    sel = predictions[(predictions["feature_set"] == feature_set) & (predictions["estimator"] == estimator)]
    if family is not None:
        sel = sel[sel["family"] == family]
    out: dict[str, dict[str, float | int]] = {}
    for prot, g in sel.groupby("protocol", sort=True):
        by = ["family", "fold"] if prot in GROUPED_PROTOCOLS else ["family", "model"]
        pooled, grouped = [], []
        for _seed, gs in g.groupby("seed", sort=True):
            pooled.append(mape(gs["y_true_ms"], gs["y_pred_ms"]))
            grouped.append(float(np.mean([mape(x["y_true_ms"], x["y_pred_ms"]) for _, x in gs.groupby(by)])))
        pm, psd = mean_sd(pooled)
        gm, gsd = mean_sd(grouped)
        out[str(prot)] = {"pooled_mape_pct_mean": round(pm, 4), "pooled_mape_pct_sd": round(psd, 4),
                          "mean_group_mape_pct_mean": round(gm, 4), "mean_group_mape_pct_sd": round(gsd, 4),
                          "n_seeds": int(len(pooled)), "n_test_rows": int(len(g) // max(1, len(pooled)))}
    return out


def train_iteration_predictor(table: pd.DataFrame, families: Sequence[str], feature_set: str = "clean",
                              estimator: str = "xgboost", seed: int = 42,
                              clean_options: Mapping[str, Any] | None = None, n_jobs: int = 1,
                              n_estimators_scale: float = 1.0,
                              predictions: pd.DataFrame | None = None) -> IterationTimePredictor:
    """Fit ``feature_set`` + ``estimator`` on every ``ok`` row of each family; metadata records the
    training rows, features, required columns and (from ``predictions``) the cross-validated MAPE."""
    import sklearn
    import xgboost

    import traintime

    opts = dict(clean_options or {})
    models, fam_meta = {}, {}
    with threadpool_limits(limits=max(1, n_jobs)):
        for family in families:
            rows = table[(table["family"] == family) & (table["status"] == "ok")]
            if "raw_row" in rows:
                rows = rows.sort_values("raw_row", kind="mergesort")
            rows = rows.reset_index(drop=True)
            if rows.empty:
                raise SchemaError(f"iteration table: no rows of family {family!r}")
            model = build_model(feature_set, estimator, family, seed, categories=vocabulary(rows), n_jobs=n_jobs,
                                n_estimators_scale=n_estimators_scale, clean_options=opts)
            t0 = time.perf_counter()
            model.fit(rows)
            log.info("%s: %s + %s trained on %d rows in %.1f s", family, feature_set, estimator, len(rows),
                     time.perf_counter() - t0)
            models[family] = model
            feats = model.features
            fam_meta[family] = {
                "training_rows": int(len(rows)),
                "feature_names": list(getattr(feats, "feature_names_", [])),
                "required_columns": list(getattr(feats, "required_columns_", [])),
                "categories": {k: list(v) for k, v in getattr(feats, "categories_", {}).items()},
                "cv": cv_summary(predictions, feature_set, estimator, family) if predictions is not None else {},
            }
    shown_opts = {k: v for k, v in opts.items() if k != "specs"} if feature_set in CLEAN_FEATURE_SETS else {}
    spec_table = opts.get("specs")
    meta = {
        "kind": "iteration_time_model", "target": ITERATION_TARGET, "unit": "ms per training step",
        "feature_set": feature_set, "estimator": estimator, "seed": int(seed), "clean_options": shown_opts,
        "n_estimators_scale": n_estimators_scale,
        "families": fam_meta,
        "cv": cv_summary(predictions, feature_set, estimator) if predictions is not None else {},
        "gpus": sorted(spec_table["gpu"]) if spec_table is not None and feature_set in CLEAN_FEATURE_SETS else [],
        "versions": {"traintime": traintime.__version__, "xgboost": xgboost.__version__,
                     "scikit-learn": sklearn.__version__, "pandas": pd.__version__, "numpy": np.__version__},
        "usage": "joblib.load(path).predict(canonical_rows) -> step_time_ms; rows need a `family` column and the "
                 "family's required_columns (traintime.chronos.estimators.load_iteration_model)",
    }
    return IterationTimePredictor(models, meta)
