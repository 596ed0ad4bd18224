"""DataLoader wait of the CHRONOS release, modelled from the host and the data only, and its combination with compute.

The release's step time is the mean over 20 timed iterations of (loader wait + compute) of each iteration, so the
means add: **step = loader wait + compute** (:func:`combine_labels`; on every released row the sum equals
``step_time_ms`` to rounding). :class:`LoaderWaitRegressor` predicts the wait from the dataset, input size, batch
size, dataset size, DataLoader workers (2 in the whole release, so constant) and the host's provider, never from a
GPU column. The provider is the only host feature the release has; it is confounded with the GPU (each GPU is its
own host), so an unseen GPU's host is only known by its provider. Used by the opt-in two-label operator stage
(:mod:`traintime.chronos.steptime_eval`) and by the default two-label table (:mod:`traintime.chronos.two_label`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.core.errors import SchemaError

#: DataLoader workers of every released row
LOADER_WORKERS = 2
#: columns :class:`LoaderWaitRegressor` reads
LOADER_COLUMNS: tuple[str, ...] = ("input_px", "batch_size", "dataset_size", "dataset", "provider")


def combine_labels(compute_ms: np.ndarray | Sequence[float], loader_ms: np.ndarray | Sequence[float]) -> np.ndarray:
    """Step time as the release measured it: mean of (loader wait + compute) per iteration = sum of means."""
    c = np.asarray(compute_ms, dtype=float)
    w = np.asarray(loader_ms, dtype=float)
    if c.shape != w.shape:
        raise SchemaError(f"compute ({c.shape}) and loader ({w.shape}) predictions differ in shape")
    if np.any(c < 0) or np.any(w < 0):
        raise SchemaError("compute time and loader wait must be >= 0")
    return c + w


class LoaderWaitRegressor(BaseEstimator, RegressorMixin):
    """XGBoost on log(1 + loader wait ms) from host/data features only (:data:`LOADER_COLUMNS`, module doc)."""

    def __init__(self, n_estimators: int = 300, max_depth: int = 4, learning_rate: float = 0.05,
                 subsample: float = 0.8, random_state: int = 0) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.random_state = random_state

    def _features(self, rows: pd.DataFrame) -> np.ndarray:
        cols = [np.log(rows["input_px"].astype(float).fillna(0.0) + 1.0),
                np.log(rows["batch_size"].astype(float)),
                np.log(rows["dataset_size"].astype(float)),
                np.full(len(rows), float(LOADER_WORKERS))]
        cols += [(rows["dataset"] == d).astype(float) for d in self.datasets_]
        cols += [(rows["provider"] == p).astype(float) for p in self.providers_]
        return np.column_stack([np.asarray(c, dtype=float) for c in cols])

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> LoaderWaitRegressor:
        from xgboost import XGBRegressor

        self.datasets_ = sorted(rows["dataset"].astype(str).unique())
        self.providers_ = sorted(rows["provider"].astype(str).unique())
        self.model_ = XGBRegressor(n_estimators=self.n_estimators, max_depth=self.max_depth,
                                   learning_rate=self.learning_rate, subsample=self.subsample, n_jobs=1,
                                   tree_method="hist", random_state=self.random_state)
        self.model_.fit(self._features(rows), np.log1p(np.maximum(np.asarray(y, dtype=float), 0.0)))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.maximum(np.expm1(self.model_.predict(self._features(rows))), 0.0)
