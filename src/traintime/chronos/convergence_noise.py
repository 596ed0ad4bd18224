"""Seed noise of the convergence epoch, intervals that combine model error and seed spread, their
coverage on grouped folds, and the curve-extrapolation evaluation (issue 14).

* :func:`seed_spread`: per configuration of the local seed study, the spread of T_conv over seeds.
* :func:`interval_coverage`: for out-of-fold predictions of the released data, the 90 % (``coverage``)
  epoch interval ``traintime predict`` prints, built for each held-out fold from the residuals of the *other*
  folds of the same family, or of every family where the family has fewer than
  :func:`~traintime.chronos.conformal.min_calibration_groups` other folds (runs under CV) to calibrate on
  (a cross-conformal construction, so no held-out run calibrates its own interval):

  ``residual``      split conformal as :func:`traintime.predict_plan.epochs_conformal` builds it
                    (:class:`~traintime.chronos.conformal.SplitConformal`, no finite-sample correction, grouped
                    by held-out fold; one residual per run under CV): prediction x exp(+-q), q the coverage
                    quantile of |ln(measured / predicted)|;
  ``seed_floored``  the rule ``traintime predict`` applies to that half-width
                    (:func:`~traintime.chronos.interval_math.seed_floored_halfwidth`): ``max(q, z s)`` with ``s``
                    the pooled sd of ln T_conv over seeds (:func:`pooled_log_sd`, in log10, times ln 10) and ``z``
                    the normal quantile of ``(1 + c) / 2``.

  The released labels come from one seed each, so the residuals already hold one draw of seed noise;
  widening them in quadrature by the seed spread would count it twice and over-cover. ``seed_floored``
  takes the model part out and puts the seed part back, which leaves the residual interval unless it is
  narrower than the seed spread alone.
  ``residual_own_family`` (:data:`OWN_FAMILY`) ``residual`` calibrated on the family's other folds however few
  they are (the rule before pooling; beside it for comparison).
* :func:`curve_extrapolation_errors`: leave-one-configuration-out MAPE of the stopping epoch
  predicted from the first k epochs (:mod:`traintime.chronos.curves`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import norm

from traintime.chronos.curves import FAMILIES, curve_prior, predict_stop_epoch
from traintime.core.errors import SchemaError


def seed_spread(runs: pd.DataFrame) -> pd.DataFrame:
    """Per ``run_id``: n_seeds, seeds, epochs per seed, mean, sd, min, max, cv_pct (sd / mean) and
    sd of log10 T_conv. ``runs``: rows with run_id, seed, epochs_to_converge (+ optional status)."""
    for c in ("run_id", "seed", "epochs_to_converge"):
        if c not in runs.columns:
            raise SchemaError(f"seed_spread: rows lack column {c}")
    out = []
    for rid, g in runs.sort_values(["run_id", "seed"]).groupby("run_id", sort=True):
        t = g["epochs_to_converge"].to_numpy(dtype=float)
        sd = float(np.std(t, ddof=1)) if len(t) > 1 else float("nan")
        out.append(dict(run_id=rid, n_seeds=len(t), seeds=" ".join(str(int(s)) for s in g["seed"]),
                        epochs=" ".join(str(int(v)) for v in t),
                        statuses=" ".join(g["status"].astype(str)) if "status" in g.columns else "",
                        mean_epochs=float(t.mean()), sd_epochs=sd, min_epochs=float(t.min()),
                        max_epochs=float(t.max()), cv_pct=100 * sd / float(t.mean()),
                        sd_log10=float(np.std(np.log10(t), ddof=1)) if len(t) > 1 else float("nan")))
    return pd.DataFrame(out)


def pooled_log_sd(spread: pd.DataFrame) -> float:
    """Pooled within-configuration sd of log10 T_conv (degrees of freedom n_seeds - 1 each)."""
    s = spread.dropna(subset=["sd_log10"])
    dof = (s["n_seeds"] - 1).to_numpy(dtype=float)
    if dof.sum() <= 0:
        return float("nan")
    return float(np.sqrt(np.sum(dof * s["sd_log10"].to_numpy() ** 2) / dof.sum()))


#: interval kind of :func:`interval_coverage` calibrated on the held-out fold's own family only, however few its
#: other folds (the rule before the pooling one; ``residual`` otherwise)
OWN_FAMILY = "residual_own_family"


def interval_coverage(preds: pd.DataFrame, seed_log_sd: float, coverage: float = 0.9) -> pd.DataFrame:
    """Coverage of cross-fold intervals per (protocol, method, seed, interval kind).

    ``preds``: out-of-fold predictions (schema ``convergence_predictions``). Columns of the result:
    protocol, method, seed, interval, n_runs, coverage_pct, target_pct, median_width_ratio (hi / lo
    of the interval, median over runs).
    """
    if not 0 < coverage < 1:
        raise SchemaError(f"coverage {coverage} must be between 0 and 1")
    from traintime.chronos.conformal import grouped_coverage

    zs = float(norm.ppf((1 + coverage) / 2)) * seed_log_sd * np.log(10.0)  # natural log, as predict
    nan = float("nan")
    kinds = {"residual": (nan, None), **({"seed_floored": (zs, None)} if np.isfinite(seed_log_sd) else {}),
             OWN_FAMILY: (nan, 0)}  # (floor, pool_below)
    rows = []
    for (protocol, method, seed), g in preds.groupby(["protocol", "method", "seed"], sort=False):
        res: dict[str, list[tuple[bool, float]]] = {k: [] for k in kinds}
        for kind, (floor, pool_below) in kinds.items():
            cov = grouped_coverage(g["epochs_measured"], g["epochs_predicted"], g["held_out"].astype(str), coverage,
                                   finite_sample=False, floor=floor, group_weighted=protocol != "cv",
                                   strata=g["family"], pool_below=pool_below)
            res[kind].extend((h, float(np.exp(2 * q))) for h, q in zip(cov["hits"], cov["log_halfwidths"])
                             if h is not None)
        for kind, hits in res.items():
            if hits:
                rows.append(dict(protocol=protocol, method=method, seed=int(seed), interval=kind, n_runs=len(hits),
                                 coverage_pct=100 * float(np.mean([h for h, _ in hits])),
                                 target_pct=100 * coverage,
                                 median_width_ratio=float(np.median([w for _, w in hits]))))
    return pd.DataFrame(rows)


#: Family label of the extrapolation ``traintime predict --curve`` makes (``exp`` with the generic prior) in
#: the curve tables
PREDICT_CURVE_FAMILY = "exp_generic_prior"

#: Columns of :func:`curve_extrapolation_errors` (also of its empty result: no converged run).
CURVE_ERROR_COLUMNS = ["family", "k", "run_id", "seed", "epochs_measured", "epochs_predicted", "ape_pct",
                       "stopped_within_k"]


def curve_extrapolation_errors(curves: pd.DataFrame, runs: pd.DataFrame, ks: Sequence[int] = (1, 2, 3, 5),
                               families: Sequence[str] = FAMILIES, with_prior: bool = True) -> pd.DataFrame:
    """Predicted vs measured stopping epoch from the first k epochs of every run.

    ``curves``: long table run_id, seed, epoch, val_loss. ``runs``: run_id, seed, epochs_to_converge,
    status, patience, min_delta, max_epochs. Only converged runs are scored. The prior of each run's
    fit comes from the complete curves of the *other* configurations (leave one configuration out,
    so its other seeds do not inform it; ``with_prior=False``: no prior, as ``traintime predict --curve``
    extrapolates). Runs whose rule already fired within the first k epochs
    are marked ``stopped_within_k`` (their prediction is exact by construction) and kept apart in the
    summary. Columns: family, k, run_id, seed, epochs_measured, epochs_predicted, ape_pct,
    stopped_within_k.
    """
    need = ("run_id", "seed", "epochs_to_converge", "status", "patience", "min_delta", "max_epochs")
    for c in need:
        if c not in runs.columns:
            raise SchemaError(f"curve_extrapolation_errors: runs lack column {c}")
    runs = runs[runs["status"] == "converged"]
    full = {(r, int(s)): g.sort_values("epoch")["val_loss"].to_numpy(float)
            for (r, s), g in curves.groupby(["run_id", "seed"])}
    out = []
    for fam in families:
        for rid in sorted(set(runs["run_id"])):
            others = [v for (r, _), v in full.items() if r != rid]
            prior = curve_prior(others, fam) if with_prior else None
            for row in runs[runs["run_id"] == rid].itertuples(index=False):
                y = full.get((rid, int(row.seed)))
                if y is None:
                    raise SchemaError(f"curve_extrapolation_errors: no curve for run {rid} seed {row.seed}")
                t = int(row.epochs_to_converge)
                for k in ks:
                    p = predict_stop_epoch(y[:k], int(row.patience), float(row.min_delta), int(row.max_epochs),
                                           fam, prior)
                    out.append(dict(family=fam, k=int(k), run_id=rid, seed=int(row.seed), epochs_measured=t,
                                    epochs_predicted=int(p), ape_pct=100 * abs(p - t) / t,
                                    stopped_within_k=bool(t <= k)))
    return pd.DataFrame(out, columns=CURVE_ERROR_COLUMNS)


def curve_summary(errors: pd.DataFrame) -> pd.DataFrame:
    """Per family and k, over runs still training after k epochs: n_runs, MAPE, median APE; and the
    MAPE of predicting the median stopping epoch of the other configurations (the no-curve bar)."""
    cols = ["family", "k", "n_runs", "n_stopped_within_k", "mape_pct", "median_ape_pct", "no_curve_median_mape_pct"]
    if errors.empty:  # no run converged within its epoch budget: nothing to score
        return pd.DataFrame(columns=cols)
    rows = []
    for (fam, k), g in errors.groupby(["family", "k"], sort=True):
        live = g[~g["stopped_within_k"]]
        rows.append(dict(family=fam, k=int(k), n_runs=len(live), n_stopped_within_k=int(g["stopped_within_k"].sum()),
                         mape_pct=float(live["ape_pct"].mean()) if len(live) else float("nan"),
                         median_ape_pct=float(live["ape_pct"].median()) if len(live) else float("nan")))
    out = pd.DataFrame(rows)
    base = errors[(errors["family"] == errors["family"].iloc[0])].drop_duplicates(["run_id", "seed"])
    ape = []
    for r in base.itertuples(index=False):
        other = base[base["run_id"] != r.run_id]["epochs_measured"]
        p = float(np.median(other)) if len(other) else float("nan")
        ape.append(100 * abs(p - r.epochs_measured) / r.epochs_measured)
    out["no_curve_median_mape_pct"] = float(np.nanmean(ape)) if np.isfinite(ape).any() else float("nan")
    return out


def curve_interval_coverage(errors: pd.DataFrame, coverage: float = 0.9) -> pd.DataFrame:
    """Per family and k: how often the ``coverage`` interval of the curve estimate held a run of a configuration
    it never saw: :func:`~traintime.chronos.conformal.grouped_coverage` by configuration (no finite-sample
    correction, as ``traintime predict --curve``; at least two other configurations to calibrate on) on the
    live errors (runs still training after k epochs). Columns: family, k, interval_runs, interval_coverage_pct,
    interval_factor (median over held-out configurations of ``exp`` of the half-width)."""
    from traintime.chronos.conformal import grouped_coverage

    rows = []
    live = errors[~errors["stopped_within_k"]] if not errors.empty else errors
    for (fam, k), g in live.groupby(["family", "k"], sort=True):
        cov = grouped_coverage(g["epochs_measured"], g["epochs_predicted"], g["run_id"].astype(str), coverage,
                               finite_sample=False, min_groups=2)
        rows.append({"family": fam, "k": int(k), "interval_runs": cov["n"],
                     "interval_coverage_pct": 100 * cov["measured"], "interval_factor":
                     float(np.exp(cov["median_log_halfwidth"]))})
    return pd.DataFrame(rows, columns=["family", "k", "interval_runs", "interval_coverage_pct", "interval_factor"])


def seed_noise_floor(runs: pd.DataFrame) -> float:
    """MAPE (%) of predicting each seed's T_conv by the median T_conv of the *other* seeds of the same
    configuration: the error a perfect configuration-level model would still make because of seed
    noise (configurations with >= 2 seeds)."""
    ape = []
    for _, g in runs.groupby("run_id"):
        t = g["epochs_to_converge"].to_numpy(dtype=float)
        for i in range(len(t)):
            if len(t) > 1:
                ape.append(100 * abs(np.median(np.delete(t, i)) - t[i]) / t[i])
    return float(np.mean(ape)) if ape else float("nan")


def versus_baseline(summary: pd.DataFrame, baseline: str = "partial_pooling", margin: float = 3.0,
                    targets: dict[str, float] | None = None) -> pd.DataFrame:
    """Per protocol and method: nine-model average MAPE (mean over seeds), its gap to ``baseline``
    (positive: better than the baseline) and whether it clears ``margin`` points, and the issue's
    target for the protocol where one is set. ``summary``: :func:`summary_seed_metrics` rows."""
    targets = targets if targets is not None else {"cv": 18.0, "lomo": 25.0}
    m = summary.groupby(["protocol", "method"], sort=False)["avg_model_mape_pct"].agg(["mean", "std", "size"])
    rows = []
    for (protocol, method), r in m.iterrows():
        base = m.loc[(protocol, baseline), "mean"] if (protocol, baseline) in m.index else float("nan")
        gap = float(base - r["mean"])
        rows.append(dict(protocol=protocol, method=method, n_seeds=int(r["size"]), avg_model_mape_pct=float(r["mean"]),
                         sd_pct=float(r["std"]) if r["size"] > 1 else float("nan"),
                         baseline_mape_pct=float(base), better_than_baseline_by=gap,
                         clears_margin=bool(gap >= margin), target_pct=targets.get(protocol, float("nan")),
                         meets_target=bool(r["mean"] <= targets[protocol]) if protocol in targets else None))
    return pd.DataFrame(rows)
