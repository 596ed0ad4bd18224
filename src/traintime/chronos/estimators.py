"""Step-time regressors (scikit-learn fit/predict), created by name, and the saved model object.

Registry (:data:`ESTIMATORS`, :func:`make_estimator`; an unknown name raises
:class:`~traintime.core.errors.UnknownNameError` with close matches):

``xgboost``
    ``XGBRegressor`` with the released CHRONOS hyperparameters per family: learning rate 0.05,
    depth 8, ``colsample_bytree`` 0.9, ``hist``, ``reg_lambda`` 1, squared error; 800 / 700 / 900
    trees and ``subsample`` 0.9 / 0.85 / 0.9 for CNN / MLP / Transformer; ``random_state`` = seed.
    Results do not depend on ``n_jobs``.
``random_forest``
    ``RandomForestRegressor`` (:data:`RF_TREES` = 100 trees, half the features per split,
    ``random_state`` = seed). Source: neither the paper (Further observations 6 gives only the
    ablation's MAPE) nor the released iteration-time code (which has no forest) gives settings; the
    released convergence code's forest (400 trees) is a different model. 100 is scikit-learn's
    default; the claims resource (``iter_mape_rf`` note) states the same number.
``mlp``
    median imputation -> standard scaling -> ``MLPRegressor`` (128, 64) ReLU, Adam, early stopping
    on 10% of the training rows, mini-batches of 200, target standardised. The paper's settings are not
    given either.
``replicate_median``
    A lookup baseline on canonical rows, not on features: the median step time of the training rows
    with the same configuration except the learning rate (``config_key``); when there is none, the
    first non-empty of the coarser keys in :data:`REPLICATE_KEYS` (other optimizer/width; other GPUs;
    other models; other datasets; same batch and GPU), else the median of all training rows.

:class:`IterationTimeModel` chains a feature builder (:mod:`traintime.chronos.features`) and an estimator for
one family; :class:`IterationTimePredictor` holds one per family plus metadata and is what the
workflow saves (joblib) for the predict CLI and the end-to-end example.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.compose import TransformedTargetRegressor

from traintime.chronos.features import CleanFeatures, FeatureBuilder
from traintime.core.errors import SchemaError, TraintimeError, unknown_name
from traintime.data.chronos import FAMILIES, ITERATION_TARGET

log = logging.getLogger(__name__)

#: released XGBoost settings that differ per family
XGB_FAMILY_PARAMS: dict[str, dict[str, float | int]] = {
    "CNN": {"n_estimators": 800, "subsample": 0.9},
    "MLP": {"n_estimators": 700, "subsample": 0.85},
    "Transformer": {"n_estimators": 900, "subsample": 0.9},
}
XGB_COMMON_PARAMS: dict[str, Any] = {
    "learning_rate": 0.05, "max_depth": 8, "colsample_bytree": 0.9, "reg_lambda": 1.0, "reg_alpha": 0.0,
    "objective": "reg:squarederror", "verbosity": 0, "tree_method": "hist",
}


def _scaled(n: int, scale: float) -> int:
    return max(1, int(round(n * scale)))


def _xgboost(family: str, seed: int, n_jobs: int, scale: float) -> Any:
    import xgboost as xgb

    fam = XGB_FAMILY_PARAMS[family]
    return xgb.XGBRegressor(n_estimators=_scaled(int(fam["n_estimators"]), scale), subsample=fam["subsample"],
                            random_state=seed, n_jobs=n_jobs, **XGB_COMMON_PARAMS)


#: Trees of the iteration-time random-forest ablation (not given by the paper or the release; see the
#: module doc); the claims resource's ``iter_mape_rf`` note must name the same number.
RF_TREES = 100


def _random_forest(family: str, seed: int, n_jobs: int, scale: float) -> Any:
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=_scaled(RF_TREES, scale), max_features=0.5, random_state=seed,
                                 n_jobs=n_jobs)


def _mlp(family: str, seed: int, n_jobs: int, scale: float) -> Any:
    from sklearn.impute import SimpleImputer
    from sklearn.neural_network import MLPRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    net = MLPRegressor(hidden_layer_sizes=(128, 64), alpha=1e-4, learning_rate_init=1e-3, batch_size="auto",
                       max_iter=_scaled(300, scale), early_stopping=True, validation_fraction=0.1,
                       n_iter_no_change=15, random_state=seed)
    pipe = make_pipeline(SimpleImputer(strategy="median", keep_empty_features=True), StandardScaler(), net)
    return TransformedTargetRegressor(regressor=pipe, transformer=StandardScaler())


#: (key columns, what the level means), tried in order by :class:`ReplicateMedian`
REPLICATE_KEYS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("config_key",), "same configuration, other learning rate"),
    (("model", "dataset", "batch_size", "precision_bits", "gpu"), "other optimizer or model width"),
    (("model", "dataset", "batch_size", "precision_bits", "optimizer", "param_count"), "other GPUs"),
    (("dataset", "batch_size", "precision_bits", "gpu"), "other models"),
    (("model", "batch_size", "precision_bits", "gpu"), "other datasets"),
    (("batch_size", "gpu"), "same batch size and GPU"),
)


class ReplicateMedian(RegressorMixin, BaseEstimator):
    """Median step time of matching training rows (see :data:`REPLICATE_KEYS`).

    Works on canonical rows (``needs_rows = True``): ``fit(rows, y)``, ``predict(rows)``.
    After :meth:`predict`, ``levels_`` holds the level used for each row (len(REPLICATE_KEYS) =
    global median).
    """

    needs_rows = True

    def __init__(self, keys: tuple[tuple[tuple[str, ...], str], ...] = REPLICATE_KEYS) -> None:
        self.keys = keys

    @staticmethod
    def _key(rows: pd.DataFrame, cols: tuple[str, ...]) -> pd.Series:
        missing = [c for c in cols if c not in rows.columns]
        if missing:
            raise SchemaError(f"replicate_median: rows lack column(s) {', '.join(missing)}")
        parts = [rows[c].astype(object).where(rows[c].notna(), "").astype(str) for c in cols]
        out = parts[0]
        for p in parts[1:]:
            out = out + "\x1f" + p
        return out

    def fit(self, X: pd.DataFrame, y: Any) -> "ReplicateMedian":
        yv = np.asarray(y, dtype=float)
        self.tables_ = []
        for cols, _ in self.keys:
            k = self._key(X, cols)
            self.tables_.append(pd.Series(yv, index=k.to_numpy()).groupby(level=0).median().to_dict())
        self.global_median_ = float(np.median(yv))
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        pred = np.full(len(X), np.nan)
        level = np.full(len(X), len(self.keys))
        for li, ((cols, _), table) in enumerate(zip(self.keys, self.tables_)):
            todo = np.isnan(pred)
            if not todo.any():
                break
            vals = self._key(X, cols).map(table).to_numpy(dtype=float)
            hit = todo & ~np.isnan(vals)
            pred[hit] = vals[hit]
            level[hit] = li
        pred[np.isnan(pred)] = self.global_median_
        self.levels_ = level
        return pred


def _replicate_median(family: str, seed: int, n_jobs: int, scale: float) -> Any:
    return ReplicateMedian()


@dataclass(frozen=True)
class EstimatorSpec:
    factory: Callable[[str, int, int, float], Any]
    description: str


ESTIMATORS: dict[str, EstimatorSpec] = {
    "xgboost": EstimatorSpec(_xgboost, "XGBoost, released CHRONOS hyperparameters per family"),
    "random_forest": EstimatorSpec(_random_forest, f"random forest, {RF_TREES} trees, max_features 0.5"),
    "mlp": EstimatorSpec(_mlp, "MLP regressor (128, 64), scaled inputs and target"),
    "replicate_median": EstimatorSpec(_replicate_median, "median of the training replicates of the configuration "
                                                         "(lookup baseline)"),
}


def make_estimator(name: str, family: str, seed: int = 42, n_jobs: int = 1,
                   n_estimators_scale: float = 1.0) -> Any:
    """A fresh, unfitted regressor ``name`` for ``family``.

    ``n_estimators_scale`` multiplies tree counts (and MLP epochs); values other than 1 are for
    fast tests only and do not reproduce the released settings.
    """
    if name not in ESTIMATORS:
        raise unknown_name("estimator", name, ESTIMATORS)
    if family not in FAMILIES:
        raise unknown_name("model family", family, FAMILIES)
    return ESTIMATORS[name].factory(family, seed, n_jobs, n_estimators_scale)


def needs_rows(estimator: Any) -> bool:
    return bool(getattr(estimator, "needs_rows", False))


def _matrix(X: pd.DataFrame) -> np.ndarray:
    """The feature frame as a float array for the regressor. The builder fixes the column order
    (``feature_names_``); a bare array spares XGBoost its per-round feature-name checks (about 3 % of a
    grouped evaluation job, measured) and gives the same trees."""
    return X.to_numpy(dtype=float)


class IterationTimeModel(RegressorMixin, BaseEstimator):
    """Feature builder + regressor for one family: ``fit(rows)`` / ``predict(rows) -> step_time_ms``.

    ``rows`` are canonical ``iteration`` rows (a DataFrame); ``y`` defaults to ``rows.step_time_ms``.
    ``log_target`` fits log(step time) and predicts exp(.) (geometric-mean regression; suits MAPE).
    A feature builder with a target offset (:meth:`FeatureBuilder.log_offset`) needs ``log_target``;
    the regressor then fits log(step time) - offset.
    """

    def __init__(self, features: FeatureBuilder, estimator: Any, log_target: bool = False) -> None:
        self.features = features
        self.estimator = estimator
        self.log_target = log_target

    def _target(self, rows: pd.DataFrame, y: Any) -> np.ndarray:
        if y is None:
            if ITERATION_TARGET not in rows:
                raise SchemaError(f"rows lack the target column '{ITERATION_TARGET}'")
            y = rows[ITERATION_TARGET]
        yv = np.asarray(y, dtype=float)
        if self.log_target and np.any(yv <= 0):
            raise SchemaError("log_target needs positive step times")
        return yv

    def fit(self, rows: pd.DataFrame, y: Any = None) -> "IterationTimeModel":
        yv = self._target(rows, y)
        yt = np.log(yv) if self.log_target else yv
        if needs_rows(self.estimator):
            self.estimator.fit(rows, yt)
        else:
            X = self.features.fit_transform(rows)
            off = self.features.log_offset(X)
            if off is not None:
                if not self.log_target:
                    raise TraintimeError(f"feature set {self.features.name} regresses a log-time offset: "
                                         "it needs log_target")
                keep = np.isfinite(off)
                if not keep.any():
                    raise SchemaError(f"feature set {self.features.name}: no row has a positive "
                                      f"{getattr(self.features, 'offset_column', 'offset')} (needs "
                                      "flops_train_per_sample and the GPU's fp32_gflops)")
                if not keep.all():
                    log.warning("feature set %s: %d of %d rows have no ideal compute time (no GPU specs) and are "
                                "left out of the fit", self.features.name, int((~keep).sum()), len(keep))
                X, yt = X[keep], yt[keep] - off[keep]
            self.estimator.fit(_matrix(X), yt)
        self.n_train_rows_ = int(len(rows))
        return self

    def predict(self, rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> np.ndarray:
        """Predicted step time in ms, shape (len(rows),). ``specs``: GPU spec table override
        (clean features only), to predict for GPUs added after training."""
        if needs_rows(self.estimator):
            p = np.asarray(self.estimator.predict(rows), dtype=float)
        else:
            if specs is not None and not isinstance(self.features, CleanFeatures):
                raise TraintimeError("a GPU spec table override needs the clean feature set")
            X = self.features.transform(rows, specs) if specs is not None else self.features.transform(rows)
            p = np.asarray(self.estimator.predict(_matrix(X)), dtype=float)
            off = self.features.log_offset(X)
            if off is not None:
                p = p + off
        return np.exp(p) if self.log_target else p


class IterationTimePredictor:
    """One :class:`IterationTimeModel` per family plus metadata; dispatches rows by ``family``.

    ``metadata`` (JSON-serialisable): feature set, estimator, training rows per family,
    cross-validated MAPE per protocol, library versions.
    """

    def __init__(self, models: Mapping[str, IterationTimeModel], metadata: Mapping[str, Any]) -> None:
        self.models = dict(models)
        self.metadata = dict(metadata)

    @property
    def families(self) -> list[str]:
        return sorted(self.models)

    def predict(self, rows: pd.DataFrame, specs: pd.DataFrame | None = None) -> np.ndarray:
        """Step time in ms for each canonical row (needs a ``family`` column)."""
        if "family" not in rows:
            raise SchemaError("rows lack the column 'family' (CNN, MLP or Transformer)")
        out = np.full(len(rows), np.nan)
        fam = rows["family"].astype(str).to_numpy()
        for f in np.unique(fam):
            if f not in self.models:
                raise unknown_name("model family", str(f), self.models)
            mask = fam == f
            out[mask] = self.models[f].predict(rows.loc[mask], specs=specs)
        return out

    def save(self, path: str | os.PathLike[str]) -> None:
        import joblib

        from traintime.core.io import atomic_path

        with atomic_path(path) as tmp:
            joblib.dump(self, tmp, compress=3)

    @staticmethod
    def load(path: str | os.PathLike[str]) -> "IterationTimePredictor":
        from traintime.core.modelfile import load_joblib

        return load_joblib(path, IterationTimePredictor, "step-time model")


def load_iteration_model(path: str | os.PathLike[str]) -> IterationTimePredictor:
    """Load a saved step-time model (``results/models/iteration/iteration_model.joblib``)."""
    return IterationTimePredictor.load(path)
