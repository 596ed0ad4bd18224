"""Predict the convergence epoch T_conv (CHRONOS, second half): estimators, baselines, protocols.

Every estimator is a scikit-learn-style object whose ``fit(rows, y)`` and ``predict(rows)``
take canonical ``convergence`` rows (a DataFrame, see
:data:`traintime.data.chronos_convergence.CONVERGENCE`) and epochs (float array, shape
``(n_rows,)``). They are created by name with :func:`make_estimator` (unknown names raise
:class:`~traintime.errors.UnknownNameError`) and, like the released code, fitted separately for each
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

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestRegressor
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import KFold, LeaveOneGroupOut
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from traintime.data.chronos_convergence import FAMILIES, MODEL_LABELS, PAPER_MODELS, PROBE_COLUMNS
from traintime.errors import SchemaError, unknown_name
from traintime.io import to_markdown
from traintime.metrics import ape, mean_sd
from traintime.schema import Column, TableSchema

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
)}


def make_estimator(name: str, random_state: int = 42, n_jobs: int = 1, per_family: bool = True) -> Any:
    """An unfitted estimator by name (see :data:`ESTIMATORS`), wrapped in :class:`PerFamily` unless
    ``per_family`` is false."""
    if name not in ESTIMATORS:
        raise unknown_name("convergence estimator", name, ESTIMATORS)
    est = ESTIMATORS[name].factory(random_state, n_jobs)
    return PerFamily(est) if per_family else est


class ConvergencePredictor:
    """A fitted convergence estimator (all families) plus metadata; what the workflow saves.

    ``predict(rows)`` takes canonical ``convergence`` rows (a DataFrame with at least the columns
    the estimator uses and ``family``) and returns T_conv in epochs, shape ``(n_rows,)``.
    """

    def __init__(self, estimator: Any, metadata: dict[str, Any]) -> None:
        self.estimator = estimator
        self.metadata = dict(metadata)

    @classmethod
    def fit_all(cls, rows: pd.DataFrame, method: str, seed: int = 42) -> "ConvergencePredictor":
        """Fit ``method`` on every row (per family) and record what was used."""
        import sklearn

        est = make_estimator(method, random_state=seed)
        est.fit(rows, rows[TARGET].to_numpy(dtype=float))
        features: dict[str, Any] = {}
        for fam, m in est.models_.items():
            if isinstance(m, ReleasedPipeline):
                features[fam] = {"numeric": m.numeric_features_, "categorical": m.categorical_features_,
                                 "dropped": m.dropped_features_}
        meta = {
            "method": method, "description": ESTIMATORS[method].description, "seed": int(seed),
            "target": f"{TARGET} (epochs)", "n_training_runs": int(len(rows)),
            "training_runs_per_family": {str(k): int(v) for k, v in rows["family"].value_counts().sort_index().items()},
            "features_per_family": features,
            "versions": {"scikit-learn": sklearn.__version__, "pandas": pd.__version__, "numpy": np.__version__},
        }
        return cls(est, meta)

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator.predict(rows), dtype=float)

    def save(self, path: str) -> None:
        import joblib

        from traintime.io import atomic_path

        with atomic_path(path) as tmp:
            joblib.dump(self, tmp, compress=3)

    @staticmethod
    def load(path: str) -> "ConvergencePredictor":
        import joblib
        from pathlib import Path

        from traintime.errors import TraintimeError

        if not Path(path).exists():
            raise TraintimeError(f"{path}: model file not found (run the workflow to train it)")
        obj = joblib.load(path)
        if not isinstance(obj, ConvergencePredictor):
            raise TraintimeError(f"{path}: not a ConvergencePredictor")
        return obj


# --------------------------------------------------------------------------------------------
# Protocols


@dataclass(frozen=True)
class Split:
    """One train/test split: positional indices into the table, and what was held out."""

    family: str
    fold: str  # "fold<k>" for cv, the held-out model or dataset otherwise
    train: np.ndarray
    test: np.ndarray


def protocol_splits(rows: pd.DataFrame, protocol: str, seed: int = 42, n_splits: int = 5) -> list[Split]:
    """Splits of ``protocol`` (``cv``, ``lomo``, ``lodo``), within each family.

    Families in :data:`FAMILIES` order; every row is tested exactly once. For the group protocols
    the held-out model (dataset) never appears in the training rows.
    """
    if protocol not in PROTOCOLS:
        raise unknown_name("convergence protocol", protocol, PROTOCOLS)
    _require(rows, ["family", "model", "dataset"], f"protocol {protocol}")
    fam = rows["family"].astype(str).to_numpy()
    order = [f for f in FAMILIES if f in set(fam)] + sorted(set(fam) - set(FAMILIES))
    out: list[Split] = []
    for f in order:
        idx = np.flatnonzero(fam == f)
        sub = rows.iloc[idx]
        if protocol == "cv":
            if len(idx) < n_splits:
                raise SchemaError(f"protocol cv: family {f} has {len(idx)} rows, fewer than {n_splits} folds")
            kf = KFold(n_splits=n_splits, shuffle=True, random_state=seed)
            for k, (tr, te) in enumerate(kf.split(idx)):
                out.append(Split(f, f"fold{k}", idx[tr], idx[te]))
        else:
            groups = sub["model" if protocol == "lomo" else "dataset"].astype(str).to_numpy()
            if len(set(groups)) < 2:
                raise SchemaError(f"protocol {protocol}: family {f} has a single group, nothing to hold out")
            for tr, te in LeaveOneGroupOut().split(idx, groups=groups):
                out.append(Split(f, str(groups[te[0]]), idx[tr], idx[te]))
    return out


def _fit_predict(name: str, rows: pd.DataFrame, y: np.ndarray, split: Split, seed: int) -> np.ndarray:
    est = make_estimator(name, random_state=seed, n_jobs=1)
    est.fit(rows.iloc[split.train], y[split.train])
    return est.predict(rows.iloc[split.test])


def evaluate(rows: pd.DataFrame, methods: Sequence[str], protocols: Sequence[str], seeds: Sequence[int],
             group_protocol_seeds: str = "all", n_jobs: int = 1) -> pd.DataFrame:
    """Out-of-fold predictions of every method under every protocol and seed.

    ``group_protocol_seeds``: ``all`` runs LOMO/LODO for every seed (the partition is fixed, the
    seed only seeds the estimator); ``first`` runs them for ``seeds[0]`` only. A method whose
    fit ignores the seed (:attr:`EstimatorSpec.seeded` false) runs LOMO/LODO for ``seeds[0]``
    only (one deterministic result). Returns one row per (protocol, method, seed, run):
    protocol, method, seed, family, model, dataset, optimizer, learning_rate, batch_size,
    raw_row, held_out (fold label), epochs_measured, epochs_predicted, ape_pct.
    """
    for m in methods:
        if m not in ESTIMATORS:
            raise unknown_name("convergence estimator", m, ESTIMATORS)
    if group_protocol_seeds not in ("all", "first"):
        raise unknown_name("group_protocol_seeds value", group_protocol_seeds, ["all", "first"])
    _require(rows, [TARGET, "family", "model", "dataset", "optimizer", "learning_rate", "batch_size"], "evaluate")
    rows = rows.reset_index(drop=True)
    y = rows[TARGET].to_numpy(dtype=float)
    seeds = list(seeds)
    jobs: list[tuple[str, str, int, Split]] = []
    for protocol in protocols:
        p_seeds = seeds if (protocol == "cv" or group_protocol_seeds == "all") else seeds[:1]
        for seed in p_seeds:
            splits = protocol_splits(rows, protocol, seed)
            for m in methods:
                if protocol != "cv" and not ESTIMATORS[m].seeded and seed != p_seeds[0]:
                    continue  # fixed partition and a seed-free fit: one run is the result
                jobs.extend((protocol, m, seed, s) for s in splits)
    results = Parallel(n_jobs=n_jobs, prefer="threads")(
        delayed(_fit_predict)(m, rows, y, s, seed) for (protocol, m, seed, s) in jobs)
    pred: dict[tuple[str, str, int], np.ndarray] = {}
    held: dict[tuple[str, str, int], np.ndarray] = {}
    for (protocol, m, seed, s), p in zip(jobs, results):
        key = (protocol, m, seed)
        if key not in pred:
            pred[key] = np.full(len(rows), np.nan)
            held[key] = np.empty(len(rows), dtype=object)
        pred[key][s.test] = p
        held[key][s.test] = s.fold
    base = rows[["family", "model", "dataset", "optimizer", "learning_rate", "batch_size"]].copy()
    base["raw_row"] = rows["raw_row"] if "raw_row" in rows.columns else np.arange(1, len(rows) + 1)
    frames = []
    for (protocol, m, seed), p in pred.items():
        if np.isnan(p).any():  # pragma: no cover - a split bug
            raise RuntimeError(f"{protocol}/{m}/{seed}: rows without a prediction")
        f = base.copy()
        f.insert(0, "seed", seed)
        f.insert(0, "method", m)
        f.insert(0, "protocol", protocol)
        f["held_out"] = held[(protocol, m, seed)]
        f["epochs_measured"] = y
        f["epochs_predicted"] = p
        f["ape_pct"] = ape(y, p)
        frames.append(f)
    out = pd.concat(frames, ignore_index=True)
    return sort_predictions(out, protocols, methods)


def sort_predictions(df: pd.DataFrame, protocols: Sequence[str] | None = None,
                     methods: Sequence[str] | None = None) -> pd.DataFrame:
    """Stable order: protocol, method (given order, else :data:`PROTOCOLS`/:data:`ESTIMATORS` order),
    seed, family, raw_row."""
    p_order = {p: i for i, p in enumerate(protocols or PROTOCOLS)}
    m_order = {m: i for i, m in enumerate(methods or ESTIMATORS)}
    f_order = {f: i for i, f in enumerate(FAMILIES)}
    keys = (df["raw_row"].to_numpy(), df["family"].map(f_order).fillna(99).to_numpy(), df["seed"].to_numpy(),
            df["method"].map(m_order).fillna(99).to_numpy(), df["protocol"].map(p_order).fillna(99).to_numpy())
    return df.iloc[np.lexsort(keys)].reset_index(drop=True)


PREDICTIONS = TableSchema(
    name="convergence_predictions",
    description="Out-of-fold T_conv predictions: one row per (protocol, method, seed, training run).",
    key=("protocol", "method", "seed", "family", "raw_row"),
    columns=(
        Column("protocol", "str", "evaluation protocol", allowed=tuple(PROTOCOLS)),
        Column("method", "str", "estimator name", allowed=tuple(ESTIMATORS)),
        Column("seed", "int", "seed of the split (cv) and of the estimator", min=0),
        Column("family", "str", "model family", allowed=FAMILIES),
        Column("model", "str", "model identifier"),
        Column("dataset", "str", "dataset"),
        Column("optimizer", "str", "optimizer"),
        Column("learning_rate", "float", "learning rate", min=0),
        Column("batch_size", "int", "batch size", min=1),
        Column("raw_row", "int", "row of the run in its raw file", min=1),
        Column("held_out", "str", "fold (`fold<k>`) or held-out model / dataset"),
        Column("epochs_measured", "float", "measured T_conv, epochs", min=0, target=True),
        Column("epochs_predicted", "float", "predicted T_conv, epochs"),
        Column("ape_pct", "float", "absolute percentage error, %", min=0),
    ),
)


# --------------------------------------------------------------------------------------------
# Tables


def per_model_seed_mape(preds: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) per protocol, method, seed and model: columns protocol, method, seed, model, n_runs, mape_pct."""
    g = preds.groupby(["protocol", "method", "seed", "model"], sort=True)["ape_pct"]
    return g.agg(n_runs="size", mape_pct="mean").reset_index()


def summary_seed_metrics(preds: pd.DataFrame, paper_models: Sequence[str] = PAPER_MODELS) -> pd.DataFrame:
    """Per protocol, method and seed: ``avg_model_mape_pct`` (mean of the per-model MAPEs of the
    paper's nine models, the paper's "Average"), ``pooled_mape_pct`` and ``median_ape_pct`` over
    all runs (DistilBERT included)."""
    pm = per_model_seed_mape(preds)
    pm = pm[pm["model"].isin(paper_models)]
    avg = pm.groupby(["protocol", "method", "seed"])["mape_pct"].mean().rename("avg_model_mape_pct")
    pooled = preds.groupby(["protocol", "method", "seed"])["ape_pct"].agg(
        pooled_mape_pct="mean", median_ape_pct="median", n_runs="size")
    return pd.concat([avg, pooled], axis=1).reset_index()


def _ordered(df: pd.DataFrame, methods: Sequence[str] | None, protocols: Sequence[str] | None,
             extra: Sequence[str] = ()) -> pd.DataFrame:
    p_order = {p: i for i, p in enumerate(protocols or PROTOCOLS)}
    m_order = {m: i for i, m in enumerate(methods or ESTIMATORS)}
    df = df.assign(_p=df["protocol"].map(p_order), _m=df["method"].map(m_order))
    return df.sort_values(["_p", "_m", *extra], kind="mergesort").drop(columns=["_p", "_m"]).reset_index(drop=True)


def per_model_table(preds: pd.DataFrame, reference: pd.DataFrame | None = None,
                    methods: Sequence[str] | None = None, protocols: Sequence[str] | None = None) -> pd.DataFrame:
    """Per protocol, method and model: MAPE mean and sd over seeds, plus the published value.

    ``reference``: rows (method, model, mape_pct, kind) as in ``paper_chronos_convergence.csv``;
    ``published`` rows fill ``paper_mape_pct``. Columns: protocol, method, model, model_label,
    in_paper_table, n_runs, n_seeds, mape_mean_pct, mape_sd_pct, paper_mape_pct.
    """
    pm = per_model_seed_mape(preds)
    rows = []
    for (protocol, method, model), g in pm.groupby(["protocol", "method", "model"], sort=True):
        m, sd = mean_sd(g["mape_pct"])
        rows.append(dict(protocol=protocol, method=method, model=model, model_label=MODEL_LABELS.get(model, model),
                         in_paper_table=model in PAPER_MODELS, n_runs=int(g["n_runs"].iloc[0]),
                         n_seeds=int(g["seed"].nunique()), mape_mean_pct=m, mape_sd_pct=sd))
    out = pd.DataFrame(rows)
    out["paper_mape_pct"] = _lookup(reference, out["method"], out["model"])
    model_rank = {m: i for i, m in enumerate((*PAPER_MODELS, *sorted(set(out["model"]) - set(PAPER_MODELS))))}
    out["_r"] = out["model"].map(model_rank)
    out = _ordered(out, methods, protocols, ["_r"]).drop(columns=["_r"])
    return out


def summary_table(preds: pd.DataFrame, reference: pd.DataFrame | None = None,
                  methods: Sequence[str] | None = None, protocols: Sequence[str] | None = None) -> pd.DataFrame:
    """Per protocol and method: mean and sd over seeds of the nine-model average MAPE (the paper's
    "Average"), pooled MAPE and median APE over all runs, plus the published average and the
    shared notes' re-run value where ``reference`` has them (model ``average``)."""
    s = summary_seed_metrics(preds)
    rows = []
    for (protocol, method), g in s.groupby(["protocol", "method"], sort=True):
        row = dict(protocol=protocol, method=method, n_seeds=int(g["seed"].nunique()), n_runs=int(g["n_runs"].iloc[0]))
        for col in ("avg_model_mape_pct", "pooled_mape_pct", "median_ape_pct"):
            row[f"{col[:-4]}_mean_pct"], row[f"{col[:-4]}_sd_pct"] = mean_sd(g[col])
        rows.append(row)
    out = pd.DataFrame(rows)
    avg = pd.Series("average", index=out.index)
    out["paper_avg_model_mape_pct"] = _lookup(reference, out["method"], avg)
    out["notes_rerun_avg_model_mape_pct"] = _lookup(reference, out["method"], avg, kind="notes_rerun",
                                                     protocol=out["protocol"])
    return _ordered(out, methods, protocols)


def _lookup(reference: pd.DataFrame | None, methods: pd.Series, models: pd.Series, kind: str = "published",
            protocol: pd.Series | None = None) -> pd.Series:
    if reference is None or reference.empty:
        return pd.Series(np.nan, index=methods.index)
    ref = reference[reference["kind"] == kind]
    if protocol is None:
        ref = ref.drop_duplicates(["method", "model"])
        table = {(m, d): v for m, d, v in zip(ref["method"], ref["model"], ref["mape_pct"])}
        return pd.Series([table.get((m, d), np.nan) for m, d in zip(methods, models)], index=methods.index,
                         dtype=float)
    table = {(m, d, p): v for m, d, p, v in zip(ref["method"], ref["model"], ref["protocol"], ref["mape_pct"])}
    return pd.Series([table.get((m, d, p), np.nan) for m, d, p in zip(methods, models, protocol)],
                     index=methods.index, dtype=float)


def fmt_cell(mean: float, sd: float, n_seeds: int, digits: int = 2) -> str:
    """'12.34 +- 0.56', or '12.34' when a single seed (or one deterministic fit) was run."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    if n_seeds <= 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} +- {sd:.{digits}f}"


# --------------------------------------------------------------------------------------------
# Reference values (published, and the shared notes' re-run)

REFERENCE = TableSchema(
    name="convergence_reference",
    description="Reference convergence MAPEs: values published in the CHRONOS paper (`kind = published`) "
                "and the shared notes' re-run of the released code (`kind = notes_rerun`). Not results.",
    key=("kind", "method", "model", "protocol"),
    columns=(
        Column("kind", "str", "`published` (paper) or `notes_rerun` (shared notes)",
               allowed=("published", "notes_rerun")),
        Column("method", "str", "estimator name of this project the value corresponds to"),
        Column("model", "str", "released model identifier, or `average` for the paper's nine-model average"),
        Column("protocol", "str", "protocol of a re-run value; empty for published values (the paper does not "
               "say)", nullable=True),
        Column("mape_pct", "float", "MAPE of the convergence epoch, percent", min=0),
        Column("source", "str", "where the value comes from"),
    ),
)


def load_reference(paths: Sequence[str] | None = None) -> pd.DataFrame:
    """Published and re-run reference values (default: the two packaged CSVs), validated."""
    from importlib import resources

    from traintime.io import read_csv

    if paths is None:
        base = resources.files("traintime") / "resources"
        paths = [str(base / "paper_chronos_convergence.csv"), str(base / "notes_chronos_convergence.csv")]
    frames = [REFERENCE.validate(read_csv(p, keep_default_na=False, na_values={"mape_pct": [""]}), source=str(p))
              for p in paths]
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Markdown and figures

METHOD_LABELS: dict[str, str] = {
    "chronos_rf": "CHRONOS RF", "chronos_xgb": "XGBoost", "no_probe_rf": "RF, no probe",
    "scaling_law": "Scaling law", "ntk_guided": "NTK-guided", "constant_mean": "Const. mean",
    "constant_median": "Const. median", "group_median": "Group median",
}
PROTOCOL_LABELS: dict[str, str] = {"cv": "5-fold CV", "lomo": "leave one model out", "lodo": "leave one dataset out"}
_PAPER_COLUMNS = (("scaling_law", "paper: Scaling law"), ("ntk_guided", "paper: NTK-guided"),
                  ("chronos_rf", "paper: CHRONOS"))


def per_model_markdown(per_model: pd.DataFrame, summary: pd.DataFrame, reference: pd.DataFrame | None = None) -> str:
    """One wide markdown table per protocol: models x methods ('mean +- sd' over seeds) beside the
    paper's three columns (from ``reference``), with an 'Average (9 paper models)' row."""
    published = {} if reference is None else {
        (r.method, r.model): r.mape_pct for r in reference[reference["kind"] == "published"].itertuples()}
    parts = []
    protocols = list(dict.fromkeys(per_model["protocol"]))
    methods = list(dict.fromkeys(per_model["method"]))
    for protocol in protocols:
        pm = per_model[per_model["protocol"] == protocol]
        sm = summary[summary["protocol"] == protocol]
        models = list(dict.fromkeys(pm["model"]))
        rows = []
        for model in [*models, "average"]:
            row = {"model": "Average (9 paper models)" if model == "average" else MODEL_LABELS.get(model, model)}
            for m in methods:
                if model == "average":
                    g = sm[sm["method"] == m]
                    cell = fmt_cell(*g[["avg_model_mape_mean_pct", "avg_model_mape_sd_pct"]].iloc[0],
                                    int(g["n_seeds"].iloc[0])) if len(g) else ""
                else:
                    g = pm[(pm["method"] == m) & (pm["model"] == model)]
                    cell = fmt_cell(*g[["mape_mean_pct", "mape_sd_pct"]].iloc[0], int(g["n_seeds"].iloc[0])) \
                        if len(g) else ""
                row[METHOD_LABELS.get(m, m)] = cell
            for m, label in _PAPER_COLUMNS:
                v = published.get((m, model))
                row[label] = "" if v is None else f"{v:.2f}"
            rows.append(row)
        n_seeds = int(pm["n_seeds"].max())
        parts.append(f"## {PROTOCOL_LABELS.get(protocol, protocol)} (`{protocol}`), MAPE % "
                     f"(mean +- sd over {n_seeds} seed(s))\n\n" + to_markdown(pd.DataFrame(rows)))
    return "\n".join(parts)


def summary_markdown(summary: pd.DataFrame) -> str:
    rows = []
    for r in summary.itertuples(index=False):
        rows.append({
            "protocol": r.protocol, "method": r.method, "seeds": r.n_seeds,
            "avg of 9 models MAPE %": fmt_cell(r.avg_model_mape_mean_pct, r.avg_model_mape_sd_pct, r.n_seeds),
            "pooled MAPE % (324 runs)": fmt_cell(r.pooled_mape_mean_pct, r.pooled_mape_sd_pct, r.n_seeds),
            "median APE %": fmt_cell(r.median_ape_mean_pct, r.median_ape_sd_pct, r.n_seeds),
            "paper avg %": "" if pd.isna(r.paper_avg_model_mape_pct) else f"{r.paper_avg_model_mape_pct:.2f}",
            "notes re-run avg %": ("" if pd.isna(r.notes_rerun_avg_model_mape_pct)
                                   else f"{r.notes_rerun_avg_model_mape_pct:.2f}"),
        })
    return to_markdown(pd.DataFrame(rows))


def plot_predicted_vs_measured(preds: pd.DataFrame, method: str, protocols: Sequence[str], seed: int,
                               path: str) -> None:
    """Scatter of predicted vs measured T_conv (log axes), one panel per protocol, colour = family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traintime.io import atomic_path

    protocols = [p for p in protocols if ((preds["protocol"] == p) & (preds["method"] == method)).any()]
    fig, axes = plt.subplots(1, max(1, len(protocols)), figsize=(4.2 * max(1, len(protocols)), 4.2), squeeze=False)
    colours = {"CNN": "tab:blue", "MLP": "tab:orange", "Transformer": "tab:green"}
    lo, hi = preds["epochs_measured"].min() * 0.8, max(preds["epochs_measured"].max(), 1) * 1.25
    for ax, protocol in zip(axes[0], protocols):
        d = preds[(preds["protocol"] == protocol) & (preds["method"] == method)]
        d = d[d["seed"] == (seed if (d["seed"] == seed).any() else d["seed"].min())]
        for fam, g in d.groupby("family", sort=True):
            ax.scatter(g["epochs_measured"], g["epochs_predicted"], s=12, alpha=0.7, label=fam,
                       color=colours.get(fam))
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, label="y = x")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured epochs to converge T_conv (epochs)")
        ax.set_ylabel("predicted T_conv (epochs)")
        pooled = float(d["ape_pct"].mean())
        ax.set_title(f"{METHOD_LABELS.get(method, method)}, {PROTOCOL_LABELS.get(protocol, protocol)}\n"
                     f"seed {int(d['seed'].iloc[0])}, pooled MAPE {pooled:.1f}%", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("CHRONOS convergence: predicted vs measured epochs (out-of-fold, 324 released runs)", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, format="png", metadata={"Software": None})
    plt.close(fig)


#: bars above this MAPE are clipped and labelled with their value
YMAX_PCT = 150.0


def plot_per_model_mape(per_model: pd.DataFrame, methods: Sequence[str], path: str) -> None:
    """Grouped bars of per-model MAPE (mean over seeds, error bar = sd where several seeds ran),
    one panel per protocol; the paper's values as black ticks on the CHRONOS, NTK-guided and
    scaling-law bars; bars above :data:`YMAX_PCT` are clipped and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traintime.io import atomic_path

    protocols = list(dict.fromkeys(per_model["protocol"]))
    methods = [m for m in methods if m in set(per_model["method"])]
    models = [m for m in PAPER_MODELS if m in set(per_model["model"])]
    fig, axes = plt.subplots(len(protocols), 1, figsize=(11, 3.3 * len(protocols)), squeeze=False)
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(models))
    for ax, protocol in zip(axes[:, 0], protocols):
        d = per_model[per_model["protocol"] == protocol].set_index(["method", "model"])
        top = 0.0
        for k, m in enumerate(methods):
            mean = np.array([d.loc[(m, mo), "mape_mean_pct"] if (m, mo) in d.index else np.nan for mo in models])
            sd = np.array([d.loc[(m, mo), "mape_sd_pct"] if (m, mo) in d.index and d.loc[(m, mo), "n_seeds"] > 1
                           else 0.0 for mo in models])
            pos = x - 0.4 + width * (k + 0.5)
            clipped = np.minimum(mean, YMAX_PCT)
            ax.bar(pos, clipped, width, yerr=np.where(mean > YMAX_PCT, 0.0, sd), capsize=2,
                   label=METHOD_LABELS.get(m, m))
            for xi, v in zip(pos, mean):
                if v > YMAX_PCT:
                    ax.annotate(f"{v:.0f}", (xi, YMAX_PCT), ha="center", va="bottom", fontsize=6, rotation=90)
            top = max(top, float(np.nanmax(clipped + sd)) if np.isfinite(clipped).any() else 0.0)
            paper = [d.loc[(m, mo), "paper_mape_pct"] if (m, mo) in d.index else np.nan for mo in models]
            if np.isfinite(np.asarray(paper, dtype=float)).any():
                ax.scatter(pos, paper, marker="_", s=120, color="black", zorder=3,
                           label="paper value")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=5)
        ax.set_xticks(x, [MODEL_LABELS.get(m, m) for m in models], fontsize=8)
        ax.set_ylabel("MAPE of T_conv (%)")
        ax.set_ylim(0, min(YMAX_PCT, top) * 1.12 if top > 0 else 1)
        ax.set_title(f"Per-model convergence MAPE, {PROTOCOL_LABELS.get(protocol, protocol)} "
                     f"(bars: mean over seeds, whiskers: sd; black ticks: paper)", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, format="png", metadata={"Software": None})
    plt.close(fig)
