"""Probe features of the convergence estimator, settled (issue 14.3): a nested-CV ablation over seeds and
a measured account of the NTK-guided baseline's gap to the paper's 27 %.

Probe quantities (one forward + one backward pass on one mini-batch at initialisation):

``initial_loss``   ``initial_loss_log10`` = log10 of the initial loss l_0 (released column).
``gradient_norm``  ``gradient_norm_log10`` = log10 ||g|| with ``g`` the gradient of the batch-mean loss
                   (released column).
``ntk_proxy``      the paper's "NTK trace" as released: ``ntk_trace_proxy_log10`` = log10 ||g||^2, exactly
                   twice ``gradient_norm_log10`` in every released row; a monotone transform of it, so a
                   tree model splits identically on either (the ablation measures this, it is not assumed).
``ntk_trace``      the normalised empirical NTK trace tau = Tr(J J^T) / (B x C) (per-sample Jacobians of
                   the C logits w.r.t. all parameters, averaged over the B samples and C logits;
                   :mod:`traintime.measure.probe`). The paper names "the normalized trace" without saying what
                   it is normalised by; samples x logits is this project's reading. It needs per-sample
                   Jacobians, which the release does not contain, so it cannot enter an ablation on the
                   released runs: it is measured by ``traintime probe`` / the local convergence runs only.

:func:`probe_ablation` compares :class:`ProbeXGB` (``xgb_monotone``'s physical features + one probe
set) under each protocol's outer folds, for each seed, with one extra variant ``nested``: the probe set
chosen *inside* each outer-training fold by grouped inner CV (:class:`traintime.chronos.selection.NestedSelector`:
inner folds by model inside LOMO, by dataset inside LODO, K-fold over runs inside CV; the outer test rows
never reach it).

:func:`ntk_gap` evaluates variants of the NTK-guided baseline per model under 5-fold CV so its distance
to the paper's 27.35 % can be attributed (formula, calibration scope, probe), see :data:`NTK_VARIANTS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import t as student_t
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.linear_model import LinearRegression

from traintime.chronos.convergence import TARGET, NTKGuided, PerFamily
from traintime.chronos.convergence_pooling import (
    MONOTONE,
    XGB_MONOTONE_PARAMS,
    _log_epochs,
    _num,
    physical_features,
)
from traintime.chronos.convergence_protocols import protocol_splits
from traintime.chronos.convergence_tables import summary_seed_metrics
from traintime.chronos.selection import Candidate, NestedSelector
from traintime.core.errors import SchemaError, unknown_name
from traintime.core.metrics import ape

#: Probe sets of the ablation (released columns only).
PROBE_SETS: dict[str, tuple[str, ...]] = {
    "none": (),
    "initial_loss": ("initial_loss_log10",),
    "gradient_norm": ("gradient_norm_log10",),
    "ntk_proxy": ("ntk_trace_proxy_log10",),
    "all": ("initial_loss_log10", "gradient_norm_log10", "ntk_trace_proxy_log10"),
}
NESTED = "nested"
#: Inner group column per outer protocol (``run_key``: one group per run, i.e. plain K-fold).
INNER_GROUP = {"cv": "run_key", "lomo": "model", "lodo": "dataset"}


class ProbeXGB(BaseEstimator, RegressorMixin):
    """XGBoost on log10 epochs: :func:`physical_features` (monotone constraints as ``xgb_monotone``) plus
    the columns of one :data:`PROBE_SETS` entry (unconstrained). Constant / empty columns are dropped."""

    def __init__(self, probe_set: str = "none", random_state: int = 42, n_jobs: int = 1,
                 n_estimators: int | None = None) -> None:
        self.probe_set = probe_set
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.n_estimators = n_estimators

    def _frame(self, rows: pd.DataFrame) -> pd.DataFrame:
        if self.probe_set not in PROBE_SETS:
            raise unknown_name("probe set", self.probe_set, PROBE_SETS)
        X = physical_features(rows)
        for c in PROBE_SETS[self.probe_set]:
            if c not in rows.columns:
                raise SchemaError(f"probe set {self.probe_set}: rows lack column {c}")
            X[c] = _num(rows, c)
        return X

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "ProbeXGB":
        from xgboost import XGBRegressor

        X = self._frame(rows)
        self.features_ = [c for c in X.columns if X[c].notna().any() and X[c].nunique(dropna=True) > 1]
        params = {**XGB_MONOTONE_PARAMS, **({"n_estimators": self.n_estimators} if self.n_estimators else {})}
        self.model_ = XGBRegressor(**params, monotone_constraints=tuple(MONOTONE.get(c, 0) for c in self.features_),
                                   random_state=self.random_state, n_jobs=self.n_jobs)
        self.model_.fit(X[self.features_].to_numpy(), _log_epochs(y, "ProbeXGB"))
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        X = self._frame(rows)
        return np.power(10.0, self.model_.predict(X[self.features_].to_numpy()).astype(float))


def _probe_factory(n_estimators: int | None):
    def factory(cand: Candidate, family: str, seed: int, categories: Any) -> ProbeXGB:
        return ProbeXGB(cand.feature_set, random_state=seed, n_estimators=n_estimators)
    return factory


def _scorer(rows: pd.DataFrame, y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(ape(y_true, y_pred)))


def probe_ablation(rows: pd.DataFrame, protocols: Sequence[str] = ("cv", "lomo"), seeds: Sequence[int] = (42, 0, 1),
                   probe_sets: Sequence[str] = tuple(PROBE_SETS), inner_max_folds: int = 3,
                   n_estimators: int | None = None, model_factory: Any = None, scorer: Any = None
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Out-of-fold predictions of every probe set and of the nested choice, per protocol and seed.

    Returns ``(predictions, choices)``: predictions have the columns of
    :data:`~traintime.chronos.convergence_protocols.PREDICTIONS` with ``method`` = probe set or ``nested``;
    choices one row per (protocol, seed, family, held_out, probe set) with its inner score and ``chosen``.
    ``model_factory`` / ``scorer``: as in :class:`NestedSelector` (tests pass spies).
    """
    for p in probe_sets:
        if p not in PROBE_SETS:
            raise unknown_name("probe set", p, PROBE_SETS)
    for p in protocols:
        if p not in INNER_GROUP:
            raise unknown_name("convergence protocol", p, INNER_GROUP)
    rows = rows.reset_index(drop=True).copy()
    if "run_key" not in rows.columns:
        rows["run_key"] = [f"run{i}" for i in range(len(rows))]
    y = rows[TARGET].to_numpy(dtype=float)
    factory = model_factory or _probe_factory(n_estimators)
    cands = [Candidate(p, "log", "xgb_probe") for p in probe_sets]
    frames, choices = [], []
    for protocol in protocols:
        for seed in seeds:
            pred = {m: np.full(len(rows), np.nan) for m in (*probe_sets, NESTED)}
            held = np.empty(len(rows), dtype=object)
            for s in protocol_splits(rows, protocol, seed):
                tr_rows, te_rows = rows.iloc[s.train], rows.iloc[s.test]
                for c in cands:
                    pred[c.feature_set][s.test] = factory(c, s.family, seed, {}).fit(tr_rows, y[s.train]).predict(te_rows)
                sel = NestedSelector(cands, s.family, INNER_GROUP[protocol], seed=seed, inner_max_folds=inner_max_folds,
                                     model_factory=factory, scorer=scorer or _scorer).fit(tr_rows, y[s.train])
                pred[NESTED][s.test] = sel.predict(te_rows)
                held[s.test] = s.fold
                for c in cands:
                    choices.append(dict(protocol=protocol, seed=int(seed), family=s.family, held_out=s.fold,
                                        probe_set=c.feature_set, inner_score_mape_pct=sel.scores_[c],
                                        chosen=c == sel.best_))
            for m, p in pred.items():
                f = rows[["family", "model", "dataset", "optimizer", "learning_rate", "batch_size"]].copy()
                f.insert(0, "seed", int(seed))
                f.insert(0, "method", m)
                f.insert(0, "protocol", protocol)
                f["raw_row"] = rows["raw_row"] if "raw_row" in rows.columns else np.arange(1, len(rows) + 1)
                f["held_out"] = held
                f["epochs_measured"] = y
                f["epochs_predicted"] = p
                f["ape_pct"] = ape(y, p)
                frames.append(f)
    return pd.concat(frames, ignore_index=True), pd.DataFrame(choices)


def seed_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """Mean, sd (ddof 1) and the Student-t ``level`` interval of the mean over seeds (NaN with one seed)."""
    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if v.size < 2:
        return m, float("nan"), float("nan"), float("nan")
    sd = float(v.std(ddof=1))
    h = float(student_t.ppf((1 + level) / 2, v.size - 1)) * sd / np.sqrt(v.size)
    return m, sd, m - h, m + h


def ablation_table(preds: pd.DataFrame, choices: pd.DataFrame, baseline: str = "none") -> pd.DataFrame:
    """Per protocol and variant: nine-model average MAPE over seeds (mean, sd, 95 % t-interval), the paired
    gain over ``baseline`` (positive: the probe helps; mean, sd, 95 % interval over seeds), and for ``nested``
    the share of outer folds whose inner CV chose a probe set other than ``none``."""
    s = summary_seed_metrics(preds)
    rows = []
    for (protocol, method), g in s.groupby(["protocol", "method"], sort=False):
        g = g.sort_values("seed")
        base = s[(s["protocol"] == protocol) & (s["method"] == baseline)].sort_values("seed")
        m, sd, lo, hi = seed_interval(g["avg_model_mape_pct"])
        gain = base["avg_model_mape_pct"].to_numpy() - g["avg_model_mape_pct"].to_numpy()
        gm, gsd, glo, ghi = seed_interval(gain)
        c = choices[(choices["protocol"] == protocol) & choices["chosen"]]
        rows.append(dict(protocol=protocol, variant=method, n_seeds=int(g["seed"].nunique()),
                         probe_columns=" ".join(PROBE_SETS.get(method, ("(chosen per outer fold)",))) or "-",
                         mape_mean_pct=m, mape_sd_pct=sd, mape_ci95_lo=max(lo, 0.0), mape_ci95_hi=hi,
                         gain_vs_none_pts=gm, gain_sd_pts=gsd, gain_ci95_lo=glo, gain_ci95_hi=ghi,
                         nested_chose_a_probe_pct=(100 * float((c["probe_set"] != "none").mean())
                                                   if method == NESTED and len(c) else float("nan"))))
    order = {m: i for i, m in enumerate((*PROBE_SETS, NESTED))}
    out = pd.DataFrame(rows)
    out = out.assign(_p=out["protocol"].map({p: i for i, p in enumerate(INNER_GROUP)}), _v=out["variant"].map(order))
    return out.sort_values(["_p", "_v"], kind="mergesort").drop(columns=["_p", "_v"]).reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# The NTK-guided baseline's gap


class _OLSLog(BaseEstimator, RegressorMixin):
    """OLS of log10 T on a design built by ``design(rows)``; optional one intercept per ``group`` column
    (unseen groups: the plain fit)."""

    def __init__(self, design: Any, group: str | None = None) -> None:
        self.design = design
        self.group = group

    def _D(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray | None]:
        X = np.asarray(self.design(rows), dtype=float)
        if X.ndim == 1:
            X = X[:, None]
        if not np.isfinite(X).all():
            raise SchemaError("NTK variant: a log10 input is not positive/finite")
        return X, (rows[self.group].astype(str).to_numpy() if self.group else None)

    def fit(self, rows: pd.DataFrame, y: Sequence[float]) -> "_OLSLog":
        X, g = self._D(rows)
        z = _log_epochs(y, "NTK variant")
        self.plain_ = LinearRegression().fit(X, z)
        if g is not None:
            self.levels_ = sorted(set(g))
            D = np.column_stack([X] + [(g == v).astype(float) for v in self.levels_])
            self.grouped_ = LinearRegression(fit_intercept=False).fit(D, z)
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        X, g = self._D(rows)
        out = self.plain_.predict(X)
        if g is not None:
            D = np.column_stack([X] + [(g == v).astype(float) for v in self.levels_])
            out = np.where(np.isin(g, self.levels_), self.grouped_.predict(D), out)
        return np.power(10.0, out)


def _logs(rows: pd.DataFrame, *cols: str) -> np.ndarray:
    return np.column_stack([np.log10(pd.to_numeric(rows[c]).to_numpy(float)) for c in cols])


def _free(rows: pd.DataFrame) -> np.ndarray:
    return np.column_stack([_logs(rows, "learning_rate", "dataset_size", "batch_size"),
                            pd.to_numeric(rows["ntk_trace_proxy_log10"]).to_numpy(float)])


#: Variants of the NTK-guided baseline (name -> (description, per-family estimator factory)).
NTK_VARIANTS: dict[str, tuple[str, Any]] = {
    "ntk_guided": ("as evaluated: log10 T = a + b log10(lr ||g||^2 N / B), one fit per family",
                   lambda: PerFamily(_OLSLog(NTKGuided.signal_log10))),
    "ntk_no_probe": ("formula without the probe: log10 T = a + b log10(lr N / B), per family",
                     lambda: PerFamily(_OLSLog(lambda r: _logs(r, "learning_rate", "dataset_size").sum(1)
                                               - _logs(r, "batch_size")[:, 0]))),
    "ntk_free_exponents": ("separate exponents of lr, N, B and ||g||^2 (4 slopes), per family",
                           lambda: PerFamily(_OLSLog(_free))),
    "ntk_per_model": ("the formula with one intercept per model (= ntk_guided_per_model), per family",
                      lambda: PerFamily(_OLSLog(NTKGuided.signal_log10, group="model"))),
    "ntk_per_model_dataset": ("the formula with one intercept per (model, dataset), per family",
                              lambda: PerFamily(_OLSLog(NTKGuided.signal_log10, group="model_dataset"))),
    "ntk_per_model_in_sample": ("the formula fitted per model on all its runs and scored on the same runs "
                                "(training error, no held-out fold)",
                                lambda: PerFamily(_OLSLog(NTKGuided.signal_log10, group="model"))),
}
#: Variants scored on their own training rows (the one not held out).
IN_SAMPLE = ("ntk_per_model_in_sample",)


def ntk_gap(rows: pd.DataFrame, seeds: Sequence[int] = (42, 0, 1), paper: pd.DataFrame | None = None,
            variants: Sequence[str] = tuple(NTK_VARIANTS)) -> pd.DataFrame:
    """Per variant and model, MAPE under 5-fold CV (mean, sd over ``seeds``), plus the nine-model average
    (model ``average``) and the published NTK-guided value where ``paper`` (columns model, mape_pct) has it.
    Protocol splits are within each family file, so every variant is fitted on one family's rows.
    :data:`IN_SAMPLE` variants are scored on their training rows (one result, no seed)."""
    rows = rows.reset_index(drop=True).copy()
    rows["model_dataset"] = rows["model"].astype(str) + "|" + rows["dataset"].astype(str)
    y = rows[TARGET].to_numpy(dtype=float)
    frames = []
    for v in variants:
        if v not in NTK_VARIANTS:
            raise unknown_name("NTK variant", v, NTK_VARIANTS)
        for seed in (seeds[:1] if v in IN_SAMPLE else seeds):
            p = np.full(len(rows), np.nan)
            if v in IN_SAMPLE:  # no split: the seed plays no role
                p[:] = NTK_VARIANTS[v][1]().fit(rows, y).predict(rows)
            for s in ([] if v in IN_SAMPLE else protocol_splits(rows, "cv", seed)):
                p[s.test] = NTK_VARIANTS[v][1]().fit(rows.iloc[s.train], y[s.train]).predict(rows.iloc[s.test])
            f = rows[["family", "model", "dataset"]].copy()
            f["protocol"], f["method"], f["seed"], f["ape_pct"] = "cv", v, int(seed), ape(y, p)
            frames.append(f)
    preds = pd.concat(frames, ignore_index=True)
    from traintime.data.chronos_convergence import MODEL_LABELS, PAPER_MODELS

    pm = preds.groupby(["method", "seed", "model"], sort=False)["ape_pct"].mean().reset_index()
    out = []
    ref = dict(zip(paper["model"], paper["mape_pct"])) if paper is not None else {}
    for v in variants:
        d = pm[pm["method"] == v]
        for model in [*PAPER_MODELS, *sorted(set(d["model"]) - set(PAPER_MODELS))]:
            g = d[d["model"] == model]["ape_pct"]
            if g.empty:
                continue
            m, sd, _, _ = seed_interval(g)
            out.append(dict(variant=v, model=model, model_label=MODEL_LABELS.get(model, model),
                            n_seeds=int(g.size), mape_mean_pct=m,
                            mape_sd_pct=sd, paper_ntk_mape_pct=ref.get(model, float("nan"))))
        avg = d[d["model"].isin(PAPER_MODELS)].groupby("seed")["ape_pct"].mean()
        m, sd, _, _ = seed_interval(avg)
        out.append(dict(variant=v, model="average", model_label="Average (nine models)", n_seeds=int(avg.size),
                        mape_mean_pct=m,
                        mape_sd_pct=sd, paper_ntk_mape_pct=ref.get("average", float("nan"))))
    res = pd.DataFrame(out)
    res.insert(1, "description", res["variant"].map(lambda v: NTK_VARIANTS[v][0]))
    return res
