"""Predict the convergence epoch T_conv (CHRONOS, second half): estimators, baselines and the saved predictor.

Every estimator is a scikit-learn-style object whose ``fit(rows, y)`` and ``predict(rows)``
take canonical ``convergence`` rows (a DataFrame, see
:data:`traintime.data.chronos_convergence.CONVERGENCE`) and epochs (float array, shape
``(n_rows,)``). They are created by name with :func:`make_estimator` (unknown names raise
:class:`~traintime.core.errors.UnknownNameError`) and, like the released code, fitted separately for each
model family (one raw CSV each) by :class:`PerFamily`.

Estimators (:data:`ESTIMATORS`):

``chronos_rf``
    The released convergence estimator: RandomForest, 400 trees; numeric columns median-imputed
    and standardised, string columns one-hot encoded (unknown categories ignored); every column
    of the released CSV except ``T_conv``, ``T_80close`` and ``T_90close`` (see
    :data:`RELEASED_FEATURES`); numeric columns constant in the training rows dropped. The release
    decides constancy on the whole family file; here only the training rows are used.
``chronos_xgb``
    The same features with gradient-boosted trees (XGBoost; the paper uses XGBoost for iteration
    time only, so its hyper-parameters here are ours: :data:`XGB_PARAMS`).
``no_probe_rf``
    ``chronos_rf`` without the three probe features (the paper's ablation).
``scaling_law``
    OLS ``log10 T = c0 + c1 log10 P + c2 log10 N + c3 log10 B + c4 log10 lr`` (P parameters,
    N training samples, B batch size, lr learning rate). Reconstruction: the release has no code.
``ntk_guided``
    OLS ``log10 T = a + b log10(lr ||g||^2 N / B)`` with ``||g||^2 = 10**ntk_trace_proxy_log10``
    (the squared norm of the one-batch loss gradient at initialisation; the release's "NTK trace"
    column is this quantity, not a kernel trace). Reconstruction after Zancato et al. (2020).
``constant_mean`` / ``constant_median``
    Mean / median T_conv of the training rows.
``group_median``
    Median T_conv of the training rows with the same (model, dataset, optimizer), else the median
    of all training rows.
``partial_pooling``, ``pooled_loglinear``, ``xgb_monotone``, ``xgb_probe``, ``ntk_guided_per_model``, ``pooled_or_xgb``
    Issue 14's baseline and learned models: see :mod:`traintime.chronos.convergence_pooling`.
``nested``
    One of a declared candidate list, chosen by inner CV of the outer protocol's kind on the training rows
    only: see :mod:`traintime.chronos.convergence_nested`.

What the released feature set keeps (per family, after dropping constant numeric columns):
dataset, model, optimizer, the family label (one constant one-hot column) and, for
Transformers, task (one-hot); ``num_classes``, ``dataset_size``, learning rate, batch size,
``param_count`` and their log10 copies; for the token-mixing MLPs ``depth``; the three probe
columns; and for Transformers ``min_delta`` and ``max_epochs`` (two early-stopping settings that
differ between DeiT-Tiny, DistilBERT and ViT and so act as model identifiers). ``precision``,
``patience``, ``seed``, the other MLP widths and, outside the Transformer file, ``min_delta`` and
``max_epochs`` are constant and dropped. ``ntk_trace_proxy_log10`` duplicates
``gradient_norm_log10`` (exactly twice it).

Protocols (:data:`PROTOCOLS`), all within each family file as in the released code:
``cv`` shuffled 5-fold :class:`~sklearn.model_selection.KFold` (``random_state`` = the seed),
``lomo`` leave one model out, ``lodo`` leave one dataset out
(:class:`~sklearn.model_selection.LeaveOneGroupOut`). The seed also seeds the estimator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from traintime.chronos.convergence_nested import NestedConvergence, configure_nested
from traintime.chronos.convergence_pooling import (
    FeatureXGB,
    NTKGuidedPerModel,
    PartialPooling,
    PooledLogLinear,
    SeenOrFeatures,
)
from traintime.core.errors import SchemaError, unknown_name
from traintime.data.chronos_convergence import PROBE_COLUMNS

TARGET = "epochs_to_converge"

#: The released feature columns, canonical names, in the released CSVs' column order. The three
#: ``*_log10`` copies of P, lr and B are recomputed from the canonical columns.
RELEASED_FEATURES: tuple[str, ...] = (
    "dataset", "num_classes", "dataset_size", "model", "family", "task", "precision_bits", "optimizer",
    "learning_rate", "batch_size", "embed_dim", "depth", "patch_size", "token_mlp_dim", "channel_mlp_dim",
    "param_count", "param_count_log10", "learning_rate_log10", "batch_size_log10",
    *PROBE_COLUMNS, "patience", "min_delta", "max_epochs", "seed",
)
_CATEGORICAL = ("dataset", "model", "family", "task", "optimizer")
_LOG_COPIES = {"param_count_log10": "param_count", "learning_rate_log10": "learning_rate",
               "batch_size_log10": "batch_size"}

#: XGBoost settings of ``chronos_xgb`` (chosen a priori, not tuned on this data).
XGB_PARAMS: dict[str, Any] = dict(n_estimators=400, learning_rate=0.05, max_depth=6, subsample=0.8,
                                  colsample_bytree=0.9, tree_method="hist")

PROTOCOLS: dict[str, str] = {
    "cv": "shuffled 5-fold cross-validation within each family file (the released code's in-distribution test)",
    "lomo": "leave one model out within each family file",
    "lodo": "leave one dataset out within each family file",
}


def _require(rows: pd.DataFrame, cols: Iterable[str], who: str) -> None:
    missing = [c for c in cols if c not in rows.columns]
    if missing:
        raise SchemaError(f"{who}: input rows lack column(s) {', '.join(missing)}")


def released_feature_frame(rows: pd.DataFrame, use_probe: bool = True) -> pd.DataFrame:
    """Columns of the released feature set for canonical rows (shape ``(n_rows, n_columns)``).

    Numeric columns come back as float64 (NaN where the family lacks the column), strings as
    object. Missing optional columns are added empty.
    """
    out = {}
    for col in RELEASED_FEATURES:
        if not use_probe and col in PROBE_COLUMNS:
            continue
        if col in _LOG_COPIES:
            out[col] = np.log10(pd.to_numeric(rows[_LOG_COPIES[col]], errors="coerce").astype(float))
        elif col in _CATEGORICAL:
            out[col] = rows[col].astype(object) if col in rows.columns else pd.Series(None, index=rows.index,
                                                                                      dtype=object)
        else:
            out[col] = (pd.to_numeric(rows[col], errors="coerce").astype(float) if col in rows.columns
                        else pd.Series(np.nan, index=rows.index))
    return pd.DataFrame(out, index=rows.index)


class ReleasedPipeline(BaseEstimator, RegressorMixin):
    """The released preprocessing + a tree ensemble (``regressor``: ``rf`` or ``xgb``).

    Columns all-empty in the training rows are dropped, numeric columns constant in the training
    rows are dropped; numeric: median impute + standardise; strings: most-frequent impute +
    one-hot (unknown categories -> all zeros). Predicts epochs.
    """

    def __init__(self, regressor: str = "rf", use_probe: bool = True, n_estimators: int | None = None,
                 random_state: int = 42, n_jobs: int = 1) -> None:
        self.regressor = regressor
        self.use_probe = use_probe
        self.n_estimators = n_estimators
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _make_regressor(self) -> Any:
        if self.regressor == "rf":
            return RandomForestRegressor(n_estimators=self.n_estimators or 400, n_jobs=self.n_jobs,
                                         random_state=self.random_state)
        if self.regressor == "xgb":
            from xgboost import XGBRegressor

            params = {**XGB_PARAMS, **({"n_estimators": self.n_estimators} if self.n_estimators else {})}
            return XGBRegressor(**params, n_jobs=self.n_jobs, random_state=self.random_state)
        raise unknown_name("regressor", self.regressor, ["rf", "xgb"])

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "ReleasedPipeline":
        X = released_feature_frame(rows, self.use_probe)
        present = [c for c in X.columns if X[c].notna().any()]
        num = [c for c in present if c not in _CATEGORICAL and X[c].nunique(dropna=True) > 1]
        cat = [c for c in present if c in _CATEGORICAL]
        self.numeric_features_ = num
        self.categorical_features_ = cat
        self.dropped_features_ = [c for c in X.columns if c not in num and c not in cat]
        prep = ColumnTransformer(
            [("num", Pipeline([("imputer", SimpleImputer(strategy="median")), ("scaler", StandardScaler())]), num),
             ("cat", Pipeline([("imputer", SimpleImputer(strategy="most_frequent")),
                               ("onehot", OneHotEncoder(handle_unknown="ignore", sparse_output=False))]), cat)],
            remainder="drop")
        self.pipeline_ = Pipeline([("prep", prep), ("reg", self._make_regressor())])
        self.pipeline_.fit(X[num + cat], np.asarray(y, dtype=float))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        X = released_feature_frame(rows, self.use_probe)
        return np.asarray(self.pipeline_.predict(X[self.numeric_features_ + self.categorical_features_]),
                          dtype=float)


class _LogLinear(BaseEstimator, RegressorMixin):
    """OLS on log10 T; subclasses define :meth:`design` (shape ``(n_rows, k)``)."""

    columns: tuple[str, ...] = ()

    def design(self, rows: pd.DataFrame) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _checked_design(self, rows: pd.DataFrame) -> np.ndarray:
        _require(rows, self.columns, type(self).__name__)
        with np.errstate(divide="ignore", invalid="ignore"):
            Z = self.design(rows)
        if not np.all(np.isfinite(Z)):
            i = int(np.flatnonzero(~np.isfinite(Z).all(axis=1))[0])
            raise SchemaError(f"{type(self).__name__}: row {i}: a log10 input is not positive/finite "
                              f"(columns {', '.join(self.columns)})")
        return Z

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "_LogLinear":
        y = np.asarray(y, dtype=float)
        if np.any(y <= 0):
            raise SchemaError(f"{type(self).__name__}: epochs must be positive")
        self.ols_ = LinearRegression().fit(self._checked_design(rows), np.log10(y))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.power(10.0, self.ols_.predict(self._checked_design(rows)))


class ScalingLaw(_LogLinear):
    """``log10 T = c0 + c1 log10 P + c2 log10 N + c3 log10 B + c4 log10 lr`` (OLS).

    After fitting, ``coef_`` maps ``param_count``, ``dataset_size``, ``batch_size`` and
    ``learning_rate`` to their exponents and ``intercept_`` is ``c0``.
    """

    columns = ("param_count", "dataset_size", "batch_size", "learning_rate")

    def design(self, rows: pd.DataFrame) -> np.ndarray:
        return np.column_stack([np.log10(pd.to_numeric(rows[c]).to_numpy(dtype=float)) for c in self.columns])

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "ScalingLaw":
        super().fit(rows, y)
        self.coef_ = dict(zip(self.columns, map(float, self.ols_.coef_)))
        self.intercept_ = float(self.ols_.intercept_)
        return self


class NTKGuided(_LogLinear):
    """``log10 T = a + b log10(lr * ||g||^2 * N / B)`` (OLS), ``||g||^2 = 10**ntk_trace_proxy_log10``.

    After fitting, ``intercept_`` is ``a`` and ``slope_`` is ``b``.
    """

    columns = ("learning_rate", "ntk_trace_proxy_log10", "dataset_size", "batch_size")

    @staticmethod
    def signal_log10(rows: pd.DataFrame) -> np.ndarray:
        """log10(lr ||g||^2 N / B), shape ``(n_rows,)``."""
        num = {c: pd.to_numeric(rows[c]).to_numpy(dtype=float) for c in NTKGuided.columns}
        return (np.log10(num["learning_rate"]) + num["ntk_trace_proxy_log10"] + np.log10(num["dataset_size"])
                - np.log10(num["batch_size"]))

    def design(self, rows: pd.DataFrame) -> np.ndarray:
        return self.signal_log10(rows)[:, None]

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "NTKGuided":
        super().fit(rows, y)
        self.intercept_ = float(self.ols_.intercept_)
        self.slope_ = float(self.ols_.coef_[0])
        return self


class ConstantPredictor(BaseEstimator, RegressorMixin):
    """Predict one statistic (``mean`` or ``median``) of the training epochs for every row."""

    def __init__(self, statistic: str = "mean") -> None:
        self.statistic = statistic

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "ConstantPredictor":
        y = np.asarray(y, dtype=float)
        if self.statistic not in ("mean", "median"):
            raise unknown_name("statistic", self.statistic, ["mean", "median"])
        self.value_ = float(np.mean(y) if self.statistic == "mean" else np.median(y))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.full(len(rows), self.value_, dtype=float)


class GroupMedian(BaseEstimator, RegressorMixin):
    """Median training T_conv of the row's ``keys`` group; the overall training median otherwise."""

    def __init__(self, keys: tuple[str, ...] = ("model", "dataset", "optimizer")) -> None:
        self.keys = keys

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "GroupMedian":
        _require(rows, self.keys, "group_median")
        frame = rows[list(self.keys)].astype(str).copy()
        frame["_y"] = np.asarray(y, dtype=float)
        self.medians_ = {k if isinstance(k, tuple) else (k,): float(v)
                         for k, v in frame.groupby(list(self.keys), sort=True)["_y"].median().items()}
        self.fallback_ = float(np.median(frame["_y"]))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        _require(rows, self.keys, "group_median")
        keys = rows[list(self.keys)].astype(str).itertuples(index=False, name=None)
        return np.array([self.medians_.get(tuple(k), self.fallback_) for k in keys], dtype=float)


class PerFamily(BaseEstimator, RegressorMixin):
    """Fit one clone of ``estimator`` per model family (``family`` column), as the release does
    with one CSV per family; ``predict`` routes each row to its family's model."""

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "PerFamily":
        _require(rows, ["family"], "PerFamily")
        y = np.asarray(y, dtype=float)
        fam = rows["family"].astype(str).to_numpy()
        self.models_ = {}
        for f in sorted(set(fam)):
            mask = fam == f
            self.models_[f] = clone(self.estimator).fit(rows.loc[mask], y[mask])
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        _require(rows, ["family"], "PerFamily")
        fam = rows["family"].astype(str).to_numpy()
        out = np.empty(len(rows), dtype=float)
        for f in sorted(set(fam)):
            if f not in self.models_:
                raise unknown_name("model family (not in the training rows)", f, self.models_)
            mask = fam == f
            out[mask] = self.models_[f].predict(rows.loc[mask])
        return out


@dataclass(frozen=True)
class EstimatorSpec:
    name: str
    description: str
    factory: Callable[[int, int], Any]  # (random_state, n_jobs) -> unfitted estimator
    seeded: bool  # whether the random state changes the fitted model


ESTIMATORS: dict[str, EstimatorSpec] = {s.name: s for s in (
    EstimatorSpec("chronos_rf", "CHRONOS as released: RandomForest (400 trees), released features",
                  lambda rs, nj: ReleasedPipeline("rf", True, random_state=rs, n_jobs=nj), True),
    EstimatorSpec("chronos_xgb", "XGBoost on the released features",
                  lambda rs, nj: ReleasedPipeline("xgb", True, random_state=rs, n_jobs=nj), True),
    EstimatorSpec("no_probe_rf", "chronos_rf without the three probe features (ablation)",
                  lambda rs, nj: ReleasedPipeline("rf", False, random_state=rs, n_jobs=nj), True),
    EstimatorSpec("scaling_law", "OLS log10 T ~ log10 P + log10 N + log10 B + log10 lr",
                  lambda rs, nj: ScalingLaw(), False),
    EstimatorSpec("ntk_guided", "OLS log10 T ~ log10(lr ||g||^2 N / B)", lambda rs, nj: NTKGuided(), False),
    EstimatorSpec("constant_mean", "mean training T_conv", lambda rs, nj: ConstantPredictor("mean"), False),
    EstimatorSpec("constant_median", "median training T_conv", lambda rs, nj: ConstantPredictor("median"), False),
    EstimatorSpec("group_median", "median training T_conv of the same (model, dataset, optimizer)",
                  lambda rs, nj: GroupMedian(), False),
    EstimatorSpec("partial_pooling", "group medians of log T shrunk toward coarser groups (the bar to clear)",
                  lambda rs, nj: PartialPooling(), False),
    EstimatorSpec("pooled_loglinear", "partial pooling + within-group log-linear lr and batch-size slopes",
                  lambda rs, nj: PooledLogLinear(), False),
    EstimatorSpec("xgb_monotone", "XGBoost on physical features (no identifiers, no probe), monotone constraints",
                  lambda rs, nj: FeatureXGB(True, random_state=rs, n_jobs=nj), True),
    EstimatorSpec("xgb_probe", "xgb_monotone + the released probe columns (probe ablation)",
                  lambda rs, nj: FeatureXGB(True, random_state=rs, n_jobs=nj, probe=True), True),
    EstimatorSpec("ntk_guided_per_model", "ntk_guided with one intercept per model (gap probe)",
                  lambda rs, nj: NTKGuidedPerModel(), False),
    EstimatorSpec("pooled_or_xgb", "pooled_loglinear for a seen (model, dataset), xgb_monotone otherwise",
                  lambda rs, nj: SeenOrFeatures(random_state=rs, n_jobs=nj), True),
    EstimatorSpec("nested", "the candidate with the lowest inner-CV MAPE (inner folds of the outer protocol's kind)",
                  lambda rs, nj: NestedConvergence(random_state=rs, n_jobs=nj), True),
)}


def make_estimator(name: str, random_state: int = 42, n_jobs: int = 1, per_family: bool = True) -> Any:
    """An unfitted estimator by name (see :data:`ESTIMATORS`), wrapped in :class:`PerFamily` unless
    ``per_family`` is false."""
    if name not in ESTIMATORS:
        raise unknown_name("convergence estimator", name, ESTIMATORS)
    est = ESTIMATORS[name].factory(random_state, n_jobs)
    return PerFamily(est) if per_family else est


def reads_probe(estimator: Any) -> bool:
    """Whether a fitted convergence estimator reads any probe column (:data:`PROBE_COLUMNS`).

    ``traintime predict`` runs the one-batch probe only for a model that reads it (and answers epochs under
    ``--no-probe`` for one that does not). Wrappers (:class:`PerFamily`, ``nested``, ``pooled_or_xgb``) read it when
    a model inside does; any other estimator type (``ntk_guided``, say) counts as reading it."""
    if isinstance(estimator, PerFamily):
        return any(reads_probe(m) for m in estimator.models_.values())
    if isinstance(estimator, NestedConvergence):
        return reads_probe(estimator.model_)
    if isinstance(estimator, SeenOrFeatures):
        return reads_probe(estimator.pooled_) or reads_probe(estimator.features_)
    if isinstance(estimator, ReleasedPipeline):
        return bool(estimator.use_probe)
    if isinstance(estimator, FeatureXGB):
        return bool(estimator.probe)
    return not isinstance(estimator, (ScalingLaw, ConstantPredictor, GroupMedian, PartialPooling, PooledLogLinear))


class ConvergencePredictor:
    """A fitted convergence estimator (all families) plus metadata; what the workflow saves.

    ``predict(rows)`` takes canonical ``convergence`` rows (a DataFrame with at least the columns
    the estimator uses and ``family``) and returns T_conv in epochs, shape ``(n_rows,)``.
    """

    def __init__(self, estimator: Any, metadata: dict[str, Any]) -> None:
        self.estimator = estimator
        self.metadata = dict(metadata)

    @classmethod
    def fit_all(cls, rows: pd.DataFrame, method: str, seed: int = 42, protocol: str = "lomo",
                candidates: Sequence[str] | None = None) -> "ConvergencePredictor":
        """Fit ``method`` on every row (per family) and record what was used.

        ``nested`` chooses its candidate (``candidates``; default: the module's) per family by inner folds of
        ``protocol``'s kind (``lomo``: leave one model out, the question of a user whose model the release never
        ran) on all rows, then refits it there; the metadata records each family's choice and inner MAPEs."""
        import sklearn

        est = configure_nested(make_estimator(method, random_state=seed), protocol, candidates)
        est.fit(rows, rows[TARGET].to_numpy(dtype=float))
        features: dict[str, Any] = {}
        chosen: dict[str, Any] = {}
        for fam, m in est.models_.items():
            if isinstance(m, NestedConvergence):
                chosen[fam] = {"estimator": m.choice_, "inner_mape_pct": m.inner_mape_,
                               "inner_folds": m.n_inner_folds_, "inner_group": m.inner_group}
                m = m.model_
            if isinstance(m, ReleasedPipeline):
                features[fam] = {"numeric": m.numeric_features_, "categorical": m.categorical_features_,
                                 "dropped": m.dropped_features_}
        meta = {
            "method": method, "description": ESTIMATORS[method].description, "seed": int(seed),
            "target": f"{TARGET} (epochs)", "n_training_runs": int(len(rows)),
            "training_runs_per_family": {str(k): int(v) for k, v in rows["family"].value_counts().sort_index().items()},
            "features_per_family": features,
            **({"nested_protocol": protocol, "chosen_per_family": chosen} if chosen else {}),
            "reads_probe": reads_probe(est),
            "versions": {"scikit-learn": sklearn.__version__, "pandas": pd.__version__, "numpy": np.__version__},
        }
        return cls(est, meta)

    @property
    def reads_probe(self) -> bool:
        """Whether the fitted estimator reads a probe column (:func:`reads_probe`)."""
        return reads_probe(self.estimator)

    def chosen_text(self) -> str:
        """``family: estimator`` per family for a ``nested`` model (empty otherwise), for notes."""
        chosen = self.metadata.get("chosen_per_family") or {}
        return ", ".join(f"{fam}: {c['estimator']}" for fam, c in sorted(chosen.items()))

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator.predict(rows), dtype=float)

    def save(self, path: str) -> None:
        import joblib

        from traintime.core.io import atomic_path

        with atomic_path(path) as tmp:
            joblib.dump(self, tmp, compress=3)

    @staticmethod
    def load(path: str) -> "ConvergencePredictor":
        from traintime.core.modelfile import load_joblib

        return load_joblib(path, ConvergencePredictor, "convergence model")


