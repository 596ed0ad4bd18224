"""Convergence estimators beyond the release: a partial-pooling baseline and learned models on
physically meaningful features (issue 14).

Every class takes canonical ``convergence`` rows (see
:data:`traintime.data.chronos_convergence.CONVERGENCE`) and epochs, like the estimators of
:mod:`traintime.chronos.convergence`, and is registered there in ``ESTIMATORS``.

``partial_pooling`` (:class:`PartialPooling`)
    The bar every learned model must clear. In log10 epochs, the estimate of a group ``g`` at a
    level with parent estimate ``prior`` is the shrunk median

    ``m_g = (n_g * median_g + k * prior) / (n_g + k)``

    (``n_g`` training runs in the group, ``k`` = ``strength`` pseudo-runs). ``k`` is chosen inside
    each training set by an inner shuffled 5-fold CV over :data:`STRENGTH_GRID` (lowest MAPE; ties to
    the larger ``k``), so no outer test row influences it. The levels, coarse to fine:
    the family (within :class:`~traintime.chronos.convergence.PerFamily` this is the global
    median of the family's training runs); ``model`` and ``dataset`` separately, each shrunk toward
    the family; ``(model, dataset)`` shrunk toward the mean of its model and dataset estimates;
    ``(model, dataset, optimizer)`` shrunk toward its ``(model, dataset)`` estimate. A group never
    seen in training has ``n_g = 0`` and so takes its parent's estimate: an unseen model falls back to
    its dataset's estimate (averaged with the family median), an unseen dataset to its model's.
``pooled_loglinear`` (:class:`PooledLogLinear`)
    The partial-pooling group effect plus within-group slopes of log10 epochs on log10 learning rate
    and log10 batch size (a fixed-effects estimator: OLS on deviations from the group means of the
    finest level, so the slopes are learned from how the 9 runs of a group differ, which the lookup
    table ignores), one slope pair per optimizer when each optimizer has enough runs.
``xgb_probe``
    ``xgb_monotone`` plus the released probe columns ``gradient_norm_log10`` and
    ``initial_loss_log10`` (``ntk_trace_proxy_log10`` is exactly twice the first): the probe ablation
    on the new feature set, same folds and seeds.
``pooled_or_xgb`` (:class:`SeenOrFeatures`)
    ``pooled_loglinear`` where the (model, dataset) was seen in training, ``xgb_monotone`` otherwise.
``xgb_monotone`` (:class:`FeatureXGB`)
    XGBoost on log10 epochs with the features of :func:`physical_features` (dataset size and classes,
    parameters and depth, optimizer, learning rate relative to a per-optimizer default, batch size,
    precision, early-stopping settings; no model / dataset identifiers, no probe) and monotone
    constraints where the direction is known (:data:`MONOTONE`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.core.errors import SchemaError

#: Per-optimizer reference learning rate: PyTorch's default for Adam/AdamW (1e-3), the usual 1e-3
#: for Adafactor with a fixed step, and 0.1 for SGD (the common ImageNet/CIFAR ResNet setting; torch
#: has no SGD default). ``lr_rel_log10 = log10(lr / default)``.
DEFAULT_LR: dict[str, float] = {"SGD": 0.1, "Adam": 1e-3, "AdamW": 1e-3, "Adafactor": 1e-3}

#: Depth (weighted layers for CNNs, blocks for Transformers) of released models whose CSV rows carry no
#: depth; the token-mixing MLPs have a ``depth`` column (blocks). DistilBERT is left unknown: its
#: released parameter counts (8-12 M) do not match the standard 6-layer 66 M model.
KNOWN_DEPTH: dict[str, float] = {"resnet50": 50, "vgg16": 16, "densenet121": 121, "mobilenetv2": 53,
                                 "DeiT-Tiny": 12, "ViT": 12}

#: Feature columns of :func:`physical_features`.
PHYSICAL_FEATURES: tuple[str, ...] = (
    "dataset_size_log10", "num_classes_log10", "param_count_log10", "depth", "optimizer_code",
    "lr_rel_log10", "batch_size_log10", "steps_per_epoch_log10", "precision_bits", "patience", "min_delta",
    "max_epochs",
)

#: Known monotone directions (+1: more epochs when the feature grows, -1: fewer; others free).
#: ``patience`` (+1) and ``max_epochs`` (+1) delay stopping on any given curve; ``min_delta`` (-1)
#: counts fewer epochs as improving, so patience runs out sooner; ``batch_size_log10`` (+1): at a
#: fixed learning rate a larger batch takes fewer optimizer steps per epoch (an assumption, not a law).
MONOTONE: dict[str, int] = {"patience": 1, "max_epochs": 1, "min_delta": -1, "batch_size_log10": 1}

_OPTIMIZER_CODES = {"SGD": 0, "Adam": 1, "AdamW": 2, "Adafactor": 3}


def _need(rows: pd.DataFrame, cols: Sequence[str], who: str) -> None:
    missing = [c for c in cols if c not in rows.columns]
    if missing:
        raise SchemaError(f"{who}: input rows lack column(s) {', '.join(missing)}")


def _num(rows: pd.DataFrame, col: str) -> np.ndarray:
    if col not in rows.columns:
        return np.full(len(rows), np.nan)
    return pd.to_numeric(rows[col], errors="coerce").to_numpy(dtype=float)


def physical_features(rows: pd.DataFrame) -> pd.DataFrame:
    """The :data:`PHYSICAL_FEATURES` of canonical rows (float64, NaN where unknown), shape ``(n, 12)``."""
    _need(rows, ["optimizer", "learning_rate", "batch_size", "dataset_size", "param_count"], "physical_features")
    opt = rows["optimizer"].astype(str)
    default = opt.map(DEFAULT_LR).to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = _num(rows, "depth")
        known = rows["model"].astype(str).map(KNOWN_DEPTH).to_numpy(dtype=float) if "model" in rows.columns \
            else np.full(len(rows), np.nan)
        n, b = _num(rows, "dataset_size"), _num(rows, "batch_size")
        out = {
            "dataset_size_log10": np.log10(n),
            "num_classes_log10": np.log10(_num(rows, "num_classes")),
            "param_count_log10": np.log10(_num(rows, "param_count")),
            "depth": np.where(np.isfinite(depth), depth, known),
            "optimizer_code": opt.map(_OPTIMIZER_CODES).to_numpy(dtype=float),
            "lr_rel_log10": np.log10(_num(rows, "learning_rate") / default),
            "batch_size_log10": np.log10(b),
            "steps_per_epoch_log10": np.log10(np.ceil(0.8 * n / b)),
            "precision_bits": _num(rows, "precision_bits"),
            "patience": _num(rows, "patience"),
            "min_delta": _num(rows, "min_delta"),
            "max_epochs": _num(rows, "max_epochs"),
        }
    return pd.DataFrame(out, index=rows.index)


def _log_epochs(y: Sequence[float], who: str) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise SchemaError(f"{who}: epochs must be positive and finite")
    return np.log10(y)


#: Candidate shrinkage strengths (pseudo-runs) for the inner CV of :class:`PartialPooling`.
STRENGTH_GRID: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0, 8.0)


class PartialPooling(BaseEstimator, RegressorMixin):
    """Group medians of log10 epochs shrunk toward coarser groups (rule in the module docstring).

    ``strength``: pseudo-runs ``k`` of the parent estimate, or ``"cv"`` to choose it by inner 5-fold
    CV (seeded by ``random_state``) over :data:`STRENGTH_GRID`. After fitting, ``strength_`` is the
    ``k`` used, ``levels_`` maps each level name to ``{group key tuple: (n runs, shrunk log10
    estimate)}`` and ``root_`` is the log10 median of all training runs.
    """

    def __init__(self, strength: float | str = "cv", random_state: int = 0) -> None:
        self.strength = strength
        self.random_state = random_state

    _KEYS = ("model", "dataset", "optimizer")
    #: levels from the coarsest; a level's prior is built from the levels before it (:meth:`_prior`)
    _LEVELS = (("model",), ("dataset",), ("model", "dataset"), ("model", "dataset", "optimizer"))

    @classmethod
    def _group_stats(cls, frame: pd.DataFrame, z: np.ndarray
                     ) -> tuple[float, dict[tuple[str, ...], list[tuple[tuple[str, ...], int, float]]]]:
        """(median of ``z``, per level the (key, runs, median) of each group): what the estimates need of the rows,
        whatever the strength (the inner CV shrinks the same groups with every strength of the grid)."""
        df = frame.assign(_z=z)
        stats = {}
        for level in cls._LEVELS:
            stats[level] = [(key if isinstance(key, tuple) else (key,), len(g), float(np.median(g)))
                            for key, g in df.groupby(list(level), sort=True)["_z"]]
        return float(np.median(z)), stats

    def _estimates(self, frame: pd.DataFrame, z: np.ndarray, k: float) -> None:
        self._shrink(*self._group_stats(frame, z), k)

    def _shrink(self, root: float, stats: dict[tuple[str, ...], list[tuple[tuple[str, ...], int, float]]],
                k: float) -> None:
        self.strength_ = k = float(k)
        if k < 0:
            raise SchemaError("partial_pooling: strength must be >= 0")
        self.root_ = root
        self.levels_: dict[str, dict[tuple[str, ...], tuple[int, float]]] = {}
        for level in self._LEVELS:
            self.levels_["+".join(level)] = {key: (n, (n * med + k * self._prior(level, key)) / (n + k))
                                             for key, n, med in stats[level]}

    def _est(self, level: tuple[str, ...], key: tuple[str, ...]) -> float:
        hit = self.levels_["+".join(level)].get(key)
        return hit[1] if hit is not None else self._prior(level, key)

    def _prior(self, level: tuple[str, ...], key: tuple[str, ...]) -> float:
        if len(level) == 1:
            return self.root_
        if len(level) == 2:
            return 0.5 * (self._est(("model",), key[:1]) + self._est(("dataset",), key[1:2]))
        return self._est(("model", "dataset"), key[:2])

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "PartialPooling":
        _need(rows, self._KEYS, "partial_pooling")
        frame = rows[list(self._KEYS)].astype(str).reset_index(drop=True)
        z = _log_epochs(y, "partial_pooling")
        k = self.strength
        if isinstance(k, str):
            if k != "cv":
                raise SchemaError(f"partial_pooling: strength must be a number >= 0 or 'cv', not {k!r}")
            k = self._inner_cv(frame, z)
        self._estimates(frame, z, float(k))
        return self

    def _inner_cv(self, frame: pd.DataFrame, z: np.ndarray) -> float:
        from sklearn.model_selection import KFold

        if len(z) < 10:
            return 1.0
        err = np.zeros(len(STRENGTH_GRID))
        for tr, te in KFold(5, shuffle=True, random_state=self.random_state).split(z):
            inner = PartialPooling(0.0)
            root, stats = self._group_stats(frame.iloc[tr], z[tr])
            keys = self._row_keys(frame.iloc[te])
            for i, k in enumerate(STRENGTH_GRID):
                inner._shrink(root, stats, k)
                p = inner._predict_keys(keys)
                err[i] += np.sum(np.abs(np.power(10.0, p - z[te]) - 1.0))
        best = np.flatnonzero(err <= err.min() * (1 + 1e-12))
        return float(STRENGTH_GRID[best[-1]])

    def _row_keys(self, rows: pd.DataFrame) -> list[tuple[str, ...]]:
        _need(rows, self._KEYS, "partial_pooling")
        return [tuple(k) for k in rows[list(self._KEYS)].astype(str).itertuples(index=False, name=None)]

    def _predict_keys(self, keys: list[tuple[str, ...]]) -> np.ndarray:
        return np.array([self._est(self._KEYS, k) for k in keys], dtype=float)

    def predict_log10(self, rows: pd.DataFrame) -> np.ndarray:
        """Shrunk log10 epochs of each row's (model, dataset, optimizer) group, shape ``(n_rows,)``."""
        return self._predict_keys(self._row_keys(rows))

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.power(10.0, self.predict_log10(rows))


class PooledLogLinear(BaseEstimator, RegressorMixin):
    """Partial-pooling group effect + within-group slopes on log10 lr and log10 batch size.

    Slopes come from OLS (ridge ``alpha``) of log10 epochs on the two log inputs after removing
    the mean of each (model, dataset, optimizer) group, per optimizer when it has at least
    ``min_runs_per_slope`` runs (else one shared pair). Then :class:`PartialPooling` is fitted to
    ``log10 T - slopes . x`` (x centred on the training mean) and the prediction adds the slopes back.
    """

    def __init__(self, strength: float | str = "cv", alpha: float = 1e-3, min_runs_per_slope: int = 18) -> None:
        self.strength = strength
        self.alpha = alpha
        self.min_runs_per_slope = min_runs_per_slope

    _X = ("learning_rate", "batch_size")

    def _x(self, rows: pd.DataFrame) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            x = np.column_stack([np.log10(_num(rows, c)) for c in self._X])
        if not np.all(np.isfinite(x)):
            raise SchemaError("pooled_loglinear: learning_rate and batch_size must be positive numbers")
        return x - self.x_mean_

    def _slopes(self, opt: np.ndarray) -> np.ndarray:
        return np.vstack([self.slopes_.get(o, self.shared_slope_) for o in opt])

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "PooledLogLinear":
        _need(rows, [*PartialPooling._KEYS, *self._X], "pooled_loglinear")
        z = _log_epochs(y, "pooled_loglinear")
        self.x_mean_ = 0.0
        x_raw = self._x(rows)
        self.x_mean_ = x_raw.mean(axis=0)
        x = x_raw - self.x_mean_
        groups = rows[list(PartialPooling._KEYS)].astype(str).agg("|".join, axis=1).to_numpy()
        xd, zd = x.copy(), z.copy()
        for g in np.unique(groups):
            m = groups == g
            xd[m] -= xd[m].mean(axis=0)
            zd[m] -= zd[m].mean()

        def ols(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            return np.linalg.solve(a.T @ a + self.alpha * np.eye(a.shape[1]), a.T @ b)

        self.shared_slope_ = ols(xd, zd)
        opt = rows["optimizer"].astype(str).to_numpy()
        self.slopes_ = {o: ols(xd[opt == o], zd[opt == o]) for o in np.unique(opt)
                        if (opt == o).sum() >= self.min_runs_per_slope}
        resid = z - np.sum(x * self._slopes(opt), axis=1)
        self.pool_ = PartialPooling(self.strength).fit(rows, np.power(10.0, resid))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        x = self._x(rows)
        opt = rows["optimizer"].astype(str).to_numpy()
        return np.power(10.0, self.pool_.predict_log10(rows) + np.sum(x * self._slopes(opt), axis=1))


#: XGBoost settings of ``xgb_monotone`` (a priori, small trees for ~100 runs per family).
XGB_MONOTONE_PARAMS: dict[str, Any] = dict(n_estimators=300, learning_rate=0.05, max_depth=3, subsample=0.8,
                                           colsample_bytree=0.9, min_child_weight=2, tree_method="hist")


class FeatureXGB(BaseEstimator, RegressorMixin):
    """XGBoost on log10 epochs with :func:`physical_features` and :data:`MONOTONE` constraints.

    Features all-NaN or constant in the training rows are dropped (their constraint with them).
    """

    def __init__(self, monotone: bool = True, random_state: int = 42, n_jobs: int = 1, probe: bool = False) -> None:
        self.monotone = monotone
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.probe = probe

    def _frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        X = physical_features(rows)
        if self.probe:  # the released probe columns (ablation ``xgb_probe``)
            for c in ("gradient_norm_log10", "initial_loss_log10"):
                X[c] = _num(rows, c)
        return X

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "FeatureXGB":
        from xgboost import XGBRegressor

        X = self._frame(rows)
        self.features_ = [c for c in X.columns if X[c].notna().any() and X[c].nunique(dropna=True) > 1]
        cons = tuple(MONOTONE.get(c, 0) if self.monotone else 0 for c in self.features_)
        self.model_ = XGBRegressor(**XGB_MONOTONE_PARAMS, monotone_constraints=cons, random_state=self.random_state,
                                   n_jobs=self.n_jobs)
        self.model_.fit(X[self.features_].to_numpy(), _log_epochs(y, "xgb_monotone"))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        X = self._frame(rows)
        return np.power(10.0, self.model_.predict(X[self.features_].to_numpy()).astype(float))



class SeenOrFeatures(BaseEstimator, RegressorMixin):
    """``pooled_or_xgb``: :class:`PooledLogLinear` for rows whose (model, dataset) was seen in training,
    :class:`FeatureXGB` for the others (an unseen model or dataset), a rule fixed before evaluation.

    (A stacked variant, the pooled model on the feature model's out-of-fold residuals, was tried
    and was worse under 5-fold CV, 24.2 % for seed 42, than either part; it is not kept.)
    """

    def __init__(self, random_state: int = 42, n_jobs: int = 1) -> None:
        self.random_state = random_state
        self.n_jobs = n_jobs

    @staticmethod
    def _keys(rows: pd.DataFrame) -> list[tuple[str, str]]:
        return list(zip(rows["model"].astype(str), rows["dataset"].astype(str)))

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "SeenOrFeatures":
        _need(rows, ["model", "dataset"], "pooled_or_xgb")
        self.seen_ = set(self._keys(rows))
        self.pooled_ = PooledLogLinear().fit(rows, y)
        self.features_ = FeatureXGB(True, self.random_state, self.n_jobs).fit(rows, y)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        seen = np.array([k in self.seen_ for k in self._keys(rows)], dtype=bool)
        out = np.empty(len(rows))
        if seen.any():
            out[seen] = self.pooled_.predict(rows.loc[seen])
        if (~seen).any():
            out[~seen] = self.features_.predict(rows.loc[~seen])
        return out


class NTKGuidedPerModel(BaseEstimator, RegressorMixin):
    """``ntk_guided_per_model``: ``log10 T = a_model + b log10(lr ||g||^2 N / B)`` (OLS, one intercept per
    model, shared slope; an unseen model gets the family intercept of a plain fit). A measured probe of
    the NTK-guided baseline's gap to the paper's 27 %: how much of it a per-model calibration closes.
    """

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "NTKGuidedPerModel":
        from sklearn.linear_model import LinearRegression

        from traintime.chronos.convergence import NTKGuided

        z = _log_epochs(y, "ntk_guided_per_model")
        s = NTKGuided.signal_log10(rows)
        models = rows["model"].astype(str).to_numpy()
        self.models_ = sorted(set(models))
        D = np.column_stack([s] + [(models == m).astype(float) for m in self.models_])
        self.ols_ = LinearRegression(fit_intercept=False).fit(D, z)
        self.plain_ = LinearRegression().fit(s[:, None], z)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        from traintime.chronos.convergence import NTKGuided

        s = NTKGuided.signal_log10(rows)
        models = rows["model"].astype(str).to_numpy()
        seen = np.isin(models, self.models_)
        D = np.column_stack([s] + [(models == m).astype(float) for m in self.models_])
        out = np.where(seen, self.ols_.predict(D), self.plain_.predict(s[:, None]))
        return np.power(10.0, out)
