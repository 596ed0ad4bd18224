"""Fitting the roofline step model with a smooth learned efficiency (model: :mod:`traintime.chronos.efficiency_frozen`).

:class:`EfficiencyStepTime` is a scikit-learn-style regressor on step rows
(:data:`traintime.chronos.roofline_frozen.STEP_ROW_COLUMNS`): ``fit(rows, y_ms, sample_weight=None)`` minimises
the weighted mean squared log error of the step time plus a ridge penalty ``alpha`` on the standardised
efficiency coefficients (not the intercept), over the coefficients and log(launch_us), by
``scipy.optimize.least_squares`` (Levenberg-Marquardt, analytic Jacobian) from a fixed start: deterministic, no seed. It is fitted on the CHRONOS
release's compute times and the consumer-GPU traces together (issue 13 item 3: one model, both sources;
:func:`source_weights` gives each source the same total weight). :meth:`EfficiencyStepTime.to_json` freezes it
for ``traintime predict`` (numpy-only prediction, no scikit-learn on the ``--no-probe`` path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.chronos.efficiency_frozen import (
    FEATURE_SETS,
    FrozenEfficiency,
    efficiency_features,
    efficiency_predict,
)
from traintime.core.errors import SchemaError
from traintime.core.memo import frame_memo, memoized_on_frame


def source_weights(source: Any) -> np.ndarray:
    """Sample weights giving every data source (e.g. ``chronos`` / ``traces``) the same total weight, mean 1."""
    s = pd.Series(np.asarray(source)).astype(str)
    counts = s.map(s.value_counts())
    w = 1.0 / counts.to_numpy(dtype=float)
    return w * len(w) / w.sum()


class EfficiencyStepTime(RegressorMixin, BaseEstimator):
    """Roofline x sigmoid efficiency of work size, intensity, precision and GPU features (module doc).

    Parameters
    ----------
    alpha : ridge penalty on the standardised efficiency coefficients (default 0.01).
    launch_us : start value of the per-kernel launch floor in microseconds (fitted).
    trained_on : free text naming the training data (kept in the frozen JSON and the output label).
    features : name of the feature set (:data:`~traintime.chronos.efficiency_frozen.FEATURE_SETS`; default ``kernel``).
    """

    def __init__(self, alpha: float = 0.01, launch_us: float = 5.0, trained_on: str = "",
                 features: str = "kernel") -> None:
        self.alpha = alpha
        self.launch_us = launch_us
        self.trained_on = trained_on
        self.features = features

    def _features(self) -> tuple[str, ...]:
        return named_set(FEATURE_SETS, self.features, "efficiency model: feature set")

    def fit(self, rows: pd.DataFrame, y_ms: Any, sample_weight: Any = None) -> EfficiencyStepTime:
        from scipy.optimize import least_squares

        y = np.asarray(y_ms, dtype=float)
        if len(y) != len(rows):
            raise SchemaError(f"step rows ({len(rows)}) and measured times ({len(y)}) differ in length")
        feats = self._features()
        x, t = efficiency_features(rows)
        xv = x[list(feats)].to_numpy(dtype=float)
        bound = np.maximum(t["compute_ms"].to_numpy(), t["memory_ms"].to_numpy())
        launch1 = t["launch_ms"].to_numpy()
        ok = (y > 0) & np.isfinite(xv).all(axis=1) & np.isfinite(bound) & (bound > 0)
        if ok.sum() < len(feats) + 2:
            raise SchemaError(f"efficiency model: {int(ok.sum())} usable rows, need >= {len(feats) + 2}")
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
        xv, bound, launch1, ly, sw = xv[ok], bound[ok], launch1[ok], np.log(y[ok]), np.sqrt(w[ok] / w[ok].mean())
        mean = xv.mean(axis=0)
        scale = xv.std(axis=0)
        scale[scale < 1e-9] = 1.0
        z = (xv - mean) / scale
        n, k = z.shape
        ridge = np.sqrt(self.alpha)

        def resid(theta: np.ndarray) -> np.ndarray:
            eff = 1.0 / (1.0 + np.exp(-(theta[0] + z @ theta[1:k + 1])))
            pred = launch1 * np.exp(theta[-1]) + bound / eff
            r = sw * (np.log(pred) - ly) / np.sqrt(n)
            return np.concatenate([r, ridge * theta[1:k + 1]])

        def jac(theta: np.ndarray) -> np.ndarray:
            eff = 1.0 / (1.0 + np.exp(-(theta[0] + z @ theta[1:k + 1])))
            launch = launch1 * np.exp(theta[-1])
            pred = launch + bound / eff
            scale_r = (sw / np.sqrt(n))[:, None]
            d_u = (-bound * (1.0 - eff) / eff / pred)[:, None]  # d log(pred) / d (linear predictor)
            top = scale_r * np.hstack([d_u, d_u * z, (launch / pred)[:, None]])
            reg = np.zeros((k, k + 2))
            reg[:, 1:k + 1] = ridge * np.eye(k)
            return np.vstack([top, reg])

        x0 = np.concatenate([[np.log(0.3 / 0.7)], np.zeros(k), [np.log(max(self.launch_us, 1e-3))]])
        res = least_squares(resid, x0, jac=jac, method="lm", max_nfev=2000, x_scale="jac")
        self.coef_ = res.x[:k + 1].copy()
        self.launch_us_ = float(np.exp(res.x[-1]))
        self.mean_, self.scale_ = mean, scale
        self.n_rows_ = int(n)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise SchemaError("EfficiencyStepTime is not fitted: call fit() first")

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        self._check_fitted()
        return efficiency_predict(rows, self.coef_, self.mean_, self.scale_, self.launch_us_, self._features())[0]

    def efficiency(self, rows: pd.DataFrame) -> np.ndarray:
        """Fitted fraction of the roofline bound reached, per row."""
        self._check_fitted()
        return efficiency_predict(rows, self.coef_, self.mean_, self.scale_, self.launch_us_, self._features())[1]

    def to_json(self) -> dict[str, Any]:
        """Frozen parameters for :class:`~traintime.chronos.efficiency_frozen.FrozenEfficiency`."""
        self._check_fitted()
        return {"model": "efficiency", "feature_set": self.features, "features": list(self._features()), "coef": self.coef_.tolist(),
                "mean": self.mean_.tolist(), "scale": self.scale_.tolist(), "launch_us": self.launch_us_,
                "alpha": self.alpha, "rows": self.n_rows_, "trained_on": self.trained_on}

    def frozen(self) -> FrozenEfficiency:
        return FrozenEfficiency(self.to_json())


def named_set(sets: Mapping[str, tuple[str, ...]], name: str, what: str) -> tuple[str, ...]:
    """``sets[name]``; an unknown name raises :class:`SchemaError` ``"<what> '<name>' is unknown (use one of ...)"``."""
    if name not in sets:
        raise SchemaError(f"{what} {name!r} is unknown (use one of {', '.join(sets)})")
    return sets[name]


@memoized_on_frame
def group_folds(rows: pd.DataFrame, group: str, splits: int) -> list[tuple[np.ndarray, np.ndarray, pd.DataFrame,
                                                                           pd.DataFrame]]:
    """``GroupKFold`` by the ``group`` column (``splits`` folds, at most the number of groups; none when fewer than 2):
    (train positions, test positions, train rows, test rows) per fold. Memoized inside a
    :func:`~traintime.core.memo.frame_memo` scope, so the candidates of a choice get the same slices."""
    from sklearn.model_selection import GroupKFold

    groups = rows[group].astype(str).to_numpy()
    k = min(int(splits), len(np.unique(groups)))
    if k < 2:
        return []
    return [(tr, te, rows.iloc[tr], rows.iloc[te]) for tr, te in GroupKFold(n_splits=k).split(rows, groups=groups)]


def inner_group_choice(make: Callable[[str], Any], candidates: tuple[str, ...], inner_splits: int, rows: pd.DataFrame,
                       y: np.ndarray, sample_weight: Any = None, group: str = "gpu",
                       known: Mapping[str, float] | None = None) -> tuple[str, dict[str, float]]:
    """(chosen candidate, inner weighted MAPE % per candidate): each candidate estimator ``make(candidate)`` is scored
    by ``GroupKFold`` by the ``group`` column (``inner_splits`` folds, at most the number of groups; deterministic) on
    ``rows`` only; the lowest weighted mean absolute percentage error wins (the last candidate when none can be
    scored). ``known``: scores of candidates already scored by an earlier call with the same rows, weights, group
    and splits (the same estimator under another name), taken as they are instead of refitting."""
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    scores: dict[str, float] = {}
    with frame_memo():
        folds = group_folds(rows, group, int(inner_splits))
        for cand in candidates:
            if known is not None and cand in known:
                scores[cand] = float(known[cand])
                continue
            if not folds:
                scores[cand] = float("nan")
                continue
            err = np.full(len(y), np.nan)
            for tr, te, rows_tr, rows_te in folds:
                m = make(cand).fit(rows_tr, y[tr], w[tr])
                err[te] = np.abs(m.predict(rows_te) / y[te] - 1)
            ok = np.isfinite(err)
            scores[cand] = float(100 * np.sum(w[ok] * err[ok]) / np.sum(w[ok])) if ok.any() else float("nan")
    finite = {c: s for c, s in scores.items() if s == s}
    return (min(finite, key=finite.get) if finite else candidates[-1]), scores


class NestedEfficiencyStepTime(RegressorMixin, BaseEstimator):
    """:class:`EfficiencyStepTime` whose feature set is chosen *inside* ``fit`` by grouped inner cross-validation
    on the training rows only (``GroupKFold`` by GPU, ``inner_splits`` folds, deterministic): the candidate with
    the lowest weighted mean absolute percentage error over the inner held-out rows is refitted on all rows. So an
    outer fold's test rows never take part in the choice.

    Parameters
    ----------
    candidates : feature-set names tried (:data:`~traintime.chronos.efficiency_frozen.FEATURE_SETS`).
    inner_splits : inner folds (at most the number of training GPUs).
    alpha, trained_on : passed to :class:`EfficiencyStepTime`.
    inner_group : column the inner folds are grouped by (``gpu``; ``generation`` when the outer folds hold out whole
        GPU generations, so that the inner split is of the same kind as the outer one).
    """

    def __init__(self, candidates: tuple[str, ...] = ("base", "kernel"), inner_splits: int = 3, alpha: float = 0.01,
                 trained_on: str = "", inner_group: str = "gpu") -> None:
        self.candidates = candidates
        self.inner_splits = inner_splits
        self.alpha = alpha
        self.trained_on = trained_on
        self.inner_group = inner_group

    def fit(self, rows: pd.DataFrame, y_ms: Any, sample_weight: Any = None) -> NestedEfficiencyStepTime:
        y = np.asarray(y_ms, dtype=float)
        self.best_, self.inner_mape_ = inner_group_choice(
            lambda cand: EfficiencyStepTime(alpha=self.alpha, features=cand), self.candidates, self.inner_splits,
            rows, y, sample_weight, group=self.inner_group)
        self.model_ = EfficiencyStepTime(alpha=self.alpha, trained_on=self.trained_on, features=self.best_)
        self.model_.fit(rows, y, sample_weight)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        if not hasattr(self, "model_"):
            raise SchemaError("NestedEfficiencyStepTime is not fitted: call fit() first")
        return self.model_.predict(rows)

    def to_json(self) -> dict[str, Any]:
        return {**self.model_.to_json(), "selection": {"inner_splits": self.inner_splits,
                                                       "by": f"GroupKFold by {self.inner_group}",
                                                       "inner_weighted_mape_pct": self.inner_mape_}}
