"""Stopping epoch from the first k epochs, learned across runs, and its grouped evaluation (issue 14.2).

:class:`CrossRunCurveModel` is trained on *other* runs: for each training run it takes the features
of its first ``k`` validation losses (:func:`curve_features`: log first loss, log relative drop to epoch
k, log relative drop of the last epoch, the log of the stopping epoch each parametric family of
:mod:`traintime.chronos.curves` extrapolates, and the run's early-stopping settings) and fits a ridge
regression of log10 T_conv on them. A run whose rule already fired within the k observed epochs gets
that epoch exactly.

:class:`SelectedCurveMethod` chooses, on its training runs only, between the parametric families
(``exp``, ``power``, each with the prior of the training curves) and the cross-run model by grouped
inner CV (leave one configuration out; ``run_id`` is the configuration, its seeds stay together), then
refits the choice on all its training runs.

:func:`grouped_curve_errors` scores every method and the selection with outer leave-one-configuration-out
folds (the held-out configuration's seeds never reach any fit, prior or selection), for each k.
:func:`curves_table` summarises per k and method: MAPE over the runs still training after k epochs,
mean, sd and 95 % interval over the training seeds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from traintime.chronos.curves import (
    FAMILIES,
    GENERIC_PRIOR,
    _check_curve,
    fit_curve,
    predict_stop_epoch,
)
from traintime.core.errors import SchemaError, unknown_name
from traintime.measure.training_rows import CONVERGENCE_STATUSES

#: Methods scored by :func:`grouped_curve_errors` besides ``selected``.
CURVE_METHODS: tuple[str, ...] = (*FAMILIES, "cross_run", "no_curve_median")
SELECTED = "selected"


class CurveRun:
    """One run: validation losses (epochs 1..n), its stopping epoch and early-stopping settings."""

    __slots__ = ("run_id", "seed", "losses", "epochs", "patience", "min_delta", "max_epochs")

    def __init__(self, run_id: str, seed: int, losses: Sequence[float], epochs: int, patience: int,
                 min_delta: float, max_epochs: int) -> None:
        self.run_id, self.seed = str(run_id), int(seed)
        self.losses = _check_curve(losses)
        self.epochs, self.patience = int(epochs), int(patience)
        self.min_delta, self.max_epochs = float(min_delta), int(max_epochs)


@lru_cache(maxsize=65536)
def _full_fit(losses: tuple[float, ...], family: str) -> tuple[float, float] | None:
    """(a / L1, log c) of ``family`` fitted to one complete curve (as :func:`curve_prior` does), memoised:
    the same curve recurs in many folds."""
    if len(losses) < 3:
        return None
    f = fit_curve(losses, family, prior_weight=1e-3)
    return f.a / losses[0], math.log(f.c)


def training_prior(runs: Sequence[CurveRun], family: str) -> tuple[float, float]:
    """:func:`~traintime.chronos.curves.curve_prior` of the training runs' complete curves (memoised fits)."""
    pars = [p for p in (_full_fit(tuple(map(float, r.losses)), family) for r in runs) if p is not None]
    if not pars:
        return GENERIC_PRIOR[family]
    arr = np.asarray(pars)
    return float(np.median(arr[:, 0])), float(np.median(arr[:, 1]))


def _stop_within(run: CurveRun, k: int) -> int | None:
    """The epoch at which the rule fired within the first k epochs, else None."""
    from traintime.measure.train import EarlyStopping

    es = EarlyStopping(min_delta=run.min_delta, patience=run.patience, max_epochs=run.max_epochs)
    for v in run.losses[:k]:
        if es.update(float(v)):
            return es.epoch
    return None


def curve_features(run: CurveRun, k: int, priors: Mapping[str, tuple[float, float]]) -> np.ndarray:
    """Features of the first ``k`` epochs of ``run`` (shape ``(7,)``, see module doc)."""
    y = run.losses[:k]
    last = math.log10(y[-1] / y[-2]) if len(y) >= 2 else 0.0
    par = [math.log10(predict_stop_epoch(y, run.patience, run.min_delta, run.max_epochs, f, priors.get(f)))
           for f in FAMILIES]
    return np.array([math.log10(y[0]), math.log10(y[-1] / y[0]), last, *par, math.log10(run.max_epochs),
                     float(run.patience)], dtype=float)


class CrossRunCurveModel:
    """Ridge regression of log10 T_conv on :func:`curve_features` of the first ``k`` epochs, trained across runs.

    ``fit(runs)`` learns from other runs' complete curves (their priors too); ``predict(runs)`` needs only
    the first ``k`` losses of each run. Predictions are clipped to ``[k, max_epochs]``.
    """

    def __init__(self, k: int = 3, alpha: float = 1.0) -> None:
        self.k = k
        self.alpha = alpha

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"k": self.k, "alpha": self.alpha}

    def fit(self, runs: Sequence[CurveRun]) -> "CrossRunCurveModel":
        if len(runs) < 2:
            raise SchemaError("cross-run curve model: need at least two training runs")
        self.priors_ = {f: training_prior(runs, f) for f in FAMILIES}
        X = np.vstack([curve_features(r, self.k, self.priors_) for r in runs])
        z = np.log10([r.epochs for r in runs])
        self.model_ = make_pipeline(StandardScaler(), Ridge(alpha=self.alpha)).fit(X, z)
        return self

    def predict(self, runs: Sequence[CurveRun]) -> np.ndarray:
        out = []
        for r in runs:
            fired = _stop_within(r, self.k)
            if fired is not None:
                out.append(float(fired))
                continue
            p = 10 ** float(self.model_.predict(curve_features(r, self.k, self.priors_)[None, :])[0])
            out.append(float(np.clip(p, self.k, r.max_epochs)))
        return np.asarray(out)


class ParametricCurve:
    """One family of :mod:`traintime.chronos.curves` with the prior of the training curves."""

    def __init__(self, family: str = "exp", k: int = 3) -> None:
        if family not in FAMILIES:
            raise unknown_name("curve family", family, FAMILIES)
        self.family = family
        self.k = k

    def fit(self, runs: Sequence[CurveRun]) -> "ParametricCurve":
        self.prior_ = training_prior(runs, self.family)
        return self

    def predict(self, runs: Sequence[CurveRun]) -> np.ndarray:
        return np.array([float(predict_stop_epoch(r.losses[:self.k], r.patience, r.min_delta, r.max_epochs,
                                                  self.family, self.prior_)) for r in runs])


class MedianEpochs:
    """No curve: the median stopping epoch of the training runs."""

    def __init__(self, k: int = 3) -> None:
        self.k = k

    def fit(self, runs: Sequence[CurveRun]) -> "MedianEpochs":
        self.value_ = float(np.median([r.epochs for r in runs]))
        return self

    def predict(self, runs: Sequence[CurveRun]) -> np.ndarray:
        return np.full(len(runs), self.value_)


def make_curve_method(name: str, k: int) -> Any:
    """An unfitted method of :data:`CURVE_METHODS` for ``k`` observed epochs."""
    if name in FAMILIES:
        return ParametricCurve(name, k)
    if name == "cross_run":
        return CrossRunCurveModel(k)
    if name == "no_curve_median":
        return MedianEpochs(k)
    raise unknown_name("curve method", name, CURVE_METHODS)


def _mape(runs: Sequence[CurveRun], pred: np.ndarray) -> float:
    t = np.array([r.epochs for r in runs], dtype=float)
    return float(np.mean(100 * np.abs(pred - t) / t))


class SelectedCurveMethod:
    """Chooses among ``candidates`` by leave-one-configuration-out inner CV on its training runs, then refits.

    ``factory(name, k)`` builds a candidate (default :func:`make_curve_method`); tests pass a spy. With a
    single training configuration no inner fold exists and the first candidate is used.
    """

    def __init__(self, k: int = 3, candidates: Sequence[str] = (*FAMILIES, "cross_run"), factory: Any = None) -> None:
        self.k = k
        self.candidates = list(candidates)
        self.factory = factory

    def fit(self, runs: Sequence[CurveRun]) -> "SelectedCurveMethod":
        make = self.factory or make_curve_method
        configs = sorted({r.run_id for r in runs})
        self.scores_: dict[str, float] = {}
        for c in self.candidates:
            errs = []
            for held in configs if len(configs) > 1 else []:
                tr = [r for r in runs if r.run_id != held]
                va = [r for r in runs if r.run_id == held]
                try:
                    errs.append(_mape(va, make(c, self.k).fit(tr).predict(va)))
                except SchemaError:
                    errs.append(float("nan"))
            self.scores_[c] = float(np.mean(errs)) if errs and np.isfinite(errs).all() else float("nan")
        finite = [c for c in self.candidates if np.isfinite(self.scores_[c])]
        self.best_ = min(finite, key=lambda c: (self.scores_[c], self.candidates.index(c))) if finite \
            else self.candidates[0]
        self.model_ = make(self.best_, self.k).fit(runs)
        return self

    def predict(self, runs: Sequence[CurveRun]) -> np.ndarray:
        return self.model_.predict(runs)


def runs_from_tables(curves: pd.DataFrame, runs: pd.DataFrame,
                     statuses: Sequence[str] = CONVERGENCE_STATUSES) -> list[CurveRun]:
    """:class:`CurveRun` objects from the seed-study tables (curves: run_id, seed, epoch, val_loss; runs:
    run_id, seed, epochs_to_converge, status, patience, min_delta, max_epochs). Runs whose ``status`` is in
    ``statuses`` are kept: the early-stopping rule includes the epoch cap, so a run stopped by ``max_epochs``
    has a known stopping epoch too (failed runs are dropped)."""
    for c in ("run_id", "seed", "epochs_to_converge", "status", "patience", "min_delta", "max_epochs"):
        if c not in runs.columns:
            raise SchemaError(f"curve runs: the runs table lacks column {c}")
    runs = runs[runs["status"].isin(list(statuses))]
    full = {(str(r), int(s)): g.sort_values("epoch")["val_loss"].to_numpy(float)
            for (r, s), g in curves.groupby(["run_id", "seed"])}
    out = []
    for r in runs.itertuples(index=False):
        y = full.get((str(r.run_id), int(r.seed)))
        if y is None:
            raise SchemaError(f"curve runs: no curve for run {r.run_id} seed {r.seed}")
        out.append(CurveRun(r.run_id, r.seed, y, r.epochs_to_converge, r.patience, r.min_delta, r.max_epochs))
    return out


ERROR_COLUMNS = ["k", "method", "run_id", "seed", "epochs_measured", "epochs_predicted", "ape_pct",
                 "stopped_within_k", "chosen"]


def grouped_curve_errors(runs: Sequence[CurveRun], ks: Sequence[int] = (1, 2, 3, 5),
                         methods: Sequence[str] = CURVE_METHODS, factory: Any = None) -> pd.DataFrame:
    """Outer leave-one-configuration-out predictions of every method and of the inner-CV selection."""
    configs = sorted({r.run_id for r in runs})
    if len(configs) < 2:
        return pd.DataFrame(columns=ERROR_COLUMNS)
    out = []
    for k in ks:
        for held in configs:
            tr = [r for r in runs if r.run_id != held]
            te = [r for r in runs if r.run_id == held]
            preds = {}
            for m in methods:
                try:
                    preds[m] = (factory or make_curve_method)(m, k).fit(tr).predict(te)
                except SchemaError:  # too few training runs for this method: not scored on this fold
                    preds[m] = np.full(len(te), np.nan)
            sel = SelectedCurveMethod(k, factory=factory).fit(tr)
            preds[SELECTED] = sel.predict(te)
            for m, p in preds.items():
                for r, v in zip(te, p):
                    out.append(dict(k=int(k), method=m, run_id=r.run_id, seed=r.seed, epochs_measured=r.epochs,
                                    epochs_predicted=float(v), ape_pct=100 * abs(v - r.epochs) / r.epochs,
                                    stopped_within_k=bool(r.epochs <= k),
                                    chosen=sel.best_ if m == SELECTED else ""))
    return pd.DataFrame(out, columns=ERROR_COLUMNS)


def curves_table(errors: pd.DataFrame, target_pct: float = 10.0) -> pd.DataFrame:
    """Per k and method: runs still training after k epochs, MAPE mean / sd / 95 % interval over training
    seeds (MAPE per seed first; the interval's lower end clipped at 0, a MAPE cannot be negative), the target and
    whether the mean meets it; for ``selected`` the choices."""
    from traintime.chronos.convergence_probe import seed_interval

    cols = ["k", "method", "n_configurations", "n_runs", "n_seeds", "mape_mean_pct", "mape_sd_pct", "mape_ci95_lo",
            "mape_ci95_hi", "target_pct", "meets_target", "chosen"]
    if errors.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    live = errors[~errors["stopped_within_k"] & errors["epochs_predicted"].notna()]
    for (k, m), g in live.groupby(["k", "method"], sort=False):
        per_seed = g.groupby("seed")["ape_pct"].mean()
        mean, sd, lo, hi = seed_interval(per_seed)
        chosen = g["chosen"][g["chosen"] != ""]
        rows.append(dict(k=int(k), method=m, n_configurations=int(g["run_id"].nunique()), n_runs=len(g),
                         n_seeds=int(per_seed.size), mape_mean_pct=mean, mape_sd_pct=sd, mape_ci95_lo=max(lo, 0.0),
                         mape_ci95_hi=hi, target_pct=target_pct, meets_target=bool(mean <= target_pct),
                         chosen=" ".join(f"{c}:{n}" for c, n in chosen.value_counts().sort_index().items())))
    return pd.DataFrame(rows, columns=cols)
