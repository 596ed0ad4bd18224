"""End-to-end time and cost out of sample: every configuration scored by models that never saw it.

The paper's end-to-end estimate is ``hours = T_conv x (N / B) x t_iter / 3600`` and ``cost = hours x
price per GPU-hour`` (:mod:`traintime.chronos.cost`). Here it is scored on every configuration that has both
a released step time and a released convergence run, each predicted by models that did not see it:

* **step time** (``t_iter``): the out-of-fold test predictions of a grouped protocol of the iteration stage
  (``lomo``: the model held out, or ``lodo``: the dataset held out, within the family) for one entry
  (default the ``nested`` rows of :mod:`traintime.chronos.selection`). Both protocols hold out the whole
  configuration (every GPU, every learning rate); LOGO does not (the configuration is seen on the other
  GPUs) and is refused. Every prediction row is checked: its fold must be its own held-out group;
* **epochs** (``T_conv``): the convergence estimator refitted, per seed, on the runs of every *other* group
  of the same kind (leave one model / dataset of the family out) and predicting the held-out runs. Where rule
  ``convergence_evaluate`` already made those out-of-fold predictions (same estimator, protocol, folds and seed:
  identical numbers), they are read instead of refitted (:func:`stored_epochs`); each is checked to come from a
  fold that held its own group out;
* **measured**: the released step time of that configuration on that GPU (mean of its rows) and the run's
  released T_conv; "measured" hours and cost are their product (the release has no wall-clock end-to-end time).

A configuration is (family, model, dataset, optimizer, batch size, learning rate, precision); a pair is a
configuration on one GPU. Per seed: MAPE of step time, epochs (one value per configuration), hours and cost
over pairs; the GPU cost ranking per configuration (GPUs with a price): Spearman rank correlation of predicted
and measured cost, top-1 hit (the predicted cheapest GPU is the measured cheapest) and its regret (measured cost
of the predicted cheapest / measured cheapest - 1); and how often the 90 % hours interval built as ``traintime
predict`` builds it (step and epochs split-conformal half-widths in quadrature, calibrated on the other held-out
groups of the family, or of every family where it has fewer than 9) held the measured hours
(:func:`hours_interval_held`). Then mean, sd and 95 % t interval over seeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.cost import cost_usd, epoch_seconds, total_hours
from traintime.core.errors import ConfigError, SchemaError
from traintime.core.metrics import mape, mean_sd_ci95, spearman

#: protocols whose test folds hold out a configuration on every GPU, and their group column
HOLDOUT_COLUMN: dict[str, str] = {"lomo": "model", "lodo": "dataset"}
#: columns naming a configuration (with ``precision_bits``; the convergence side may leave it empty)
RUN_KEYS: tuple[str, ...] = ("family", "model", "dataset", "optimizer", "batch_size", "learning_rate")
METRICS: tuple[str, ...] = ("step_mape_pct", "epochs_mape_pct", "hours_mape_pct", "hours_median_ape_pct",
                            "cost_mape_pct", "cost_rank_spearman", "cost_top1_hit_pct", "cost_top1_regret_pct",
                            "hours_interval_coverage_pct", "hours_interval_coverage_own_family_pct")
SUMMARY_COLUMNS = ["protocol", "step_entry", "convergence_method", "family", "metric", "mean", "sd", "ci95_low",
                   "ci95_high", "n_seeds", "n_configurations", "n_pairs"]
PAIR_COLUMNS = ["seed", "family", "model", "dataset", "optimizer", "batch_size", "learning_rate", "precision_bits",
                "gpu", "price_per_hour_usd", "dataset_size", "step_ms_predicted", "step_ms_measured",
                "epochs_predicted", "epochs_measured", "hours_predicted", "hours_measured", "cost_usd_predicted",
                "cost_usd_measured"]

ConvergenceFactory = Callable[[str, int], Any]


def _default_convergence_factory(method: str, seed: int) -> Any:
    from traintime.chronos.convergence import make_estimator

    return make_estimator(method, random_state=seed)


def _config_id(df: pd.DataFrame) -> pd.Series:
    return df[list(RUN_KEYS)].astype(str).agg("|".join, axis=1) + "|" + df["precision_bits"].astype(str)


def step_time_pairs(iteration: pd.DataFrame, predictions: pd.DataFrame, protocol: str,
                    entry: tuple[str, str]) -> pd.DataFrame:
    """Out-of-fold step predictions of ``entry`` = (feature set, estimator) under ``protocol`` per
    (configuration, GPU, seed): mean predicted and measured step time over the configuration's rows.

    Raises :class:`SchemaError` when a prediction's fold is not its own held-out group (the row was not held
    out), or when ``entry`` has no prediction."""
    if protocol not in HOLDOUT_COLUMN:
        raise ConfigError(f"end-to-end out of sample: protocol {protocol!r} does not hold a configuration out on "
                          f"every GPU (one of {', '.join(HOLDOUT_COLUMN)}; logo keeps it on the other GPUs)")
    col = HOLDOUT_COLUMN[protocol]
    sel = predictions[(predictions["protocol"] == protocol) & (predictions["feature_set"] == entry[0])
                      & (predictions["estimator"] == entry[1])]
    if sel.empty:
        raise SchemaError(f"end-to-end out of sample: no {protocol} test prediction of {entry[0]} + {entry[1]} "
                          "(add it to chronos_iteration.protocol_settings)")
    if sel.duplicated(["seed", "row_id"]).any():
        raise SchemaError(f"end-to-end out of sample: a row has two {protocol} predictions in one seed")
    meta = iteration.drop_duplicates("row_id").set_index("row_id")[[*RUN_KEYS, "precision_bits"]]
    unknown = sorted(set(sel["row_id"]) - set(meta.index))
    if unknown:
        raise SchemaError(f"end-to-end out of sample: predictions name row(s) missing from the iteration table, "
                          f"e.g. {unknown[0]}")
    joined = sel.drop(columns=["family", "model", "dataset"]).join(meta, on="row_id")
    bad = joined[joined[col].astype(str) != joined["fold"].astype(str)]
    if not bad.empty:
        r = bad.iloc[0]
        raise SchemaError(f"end-to-end out of sample: row {r['row_id']} ({col} {r[col]}) was predicted in fold "
                          f"{r['fold']!r}: its own {col} was not held out, so the model saw the configuration")
    keys = [*RUN_KEYS, "precision_bits", "gpu", "seed"]
    return joined.groupby(keys, as_index=False, sort=True).agg(step_ms_predicted=("y_pred_ms", "mean"),
                                                               step_ms_measured=("y_true_ms", "mean"))


def epochs_out_of_fold(convergence: pd.DataFrame, protocol: str, method: str, seed: int,
                       factory: ConvergenceFactory | None = None) -> pd.Series:
    """T_conv of every run predicted by ``method`` refitted without the run's group (the family's model or
    dataset, as ``protocol``'s folds): a Series aligned with ``convergence``'s index."""
    from traintime.chronos.convergence import TARGET

    make = factory or _default_convergence_factory
    col = HOLDOUT_COLUMN[protocol]
    group = convergence["family"].astype(str) + "|" + convergence[col].astype(str)
    out = pd.Series(np.nan, index=convergence.index, dtype=float)
    for g in sorted(group.unique()):
        test = group == g
        train = convergence[~test]
        est = make(method, seed)
        est.fit(train, train[TARGET].to_numpy(dtype=float))
        out[test] = np.asarray(est.predict(convergence[test]), dtype=float)
    return out


def stored_epochs(stored: pd.DataFrame | None, convergence: pd.DataFrame, protocol: str, method: str,
                  seed: int) -> pd.Series | None:
    """The out-of-fold T_conv predictions of ``method`` under ``protocol`` and ``seed`` in ``stored`` (rule
    ``convergence_evaluate``'s table: ``protocol``, ``method``, ``seed``, ``held_out``, ``epochs_predicted`` and the
    run columns), aligned with ``convergence``'s index; None when ``stored`` has none for that seed. Raises
    :class:`SchemaError` when a run has no stored prediction or more than one, or was predicted in a fold that did
    not hold its own group out."""
    if stored is None:
        return None
    sel = stored[(stored["protocol"] == protocol) & (stored["method"] == method)
                 & (pd.to_numeric(stored["seed"], errors="coerce") == seed)]
    if sel.empty:
        return None
    keys = [k for k in (*RUN_KEYS, "raw_row") if k in convergence.columns and k in sel.columns]

    def key(df: pd.DataFrame) -> pd.Series:  # numbers by value (32 and 32.0 alike), names as text
        return pd.DataFrame({k: (pd.to_numeric(df[k], errors="coerce").astype(float).map(repr)
                                 if k in ("batch_size", "learning_rate", "raw_row") else df[k].astype(str))
                             for k in keys}, index=df.index).agg("|".join, axis=1)

    got = sel.assign(_k=key(sel))
    if got["_k"].duplicated().any():
        raise SchemaError(f"end-to-end out of sample: a run has two stored {method} {protocol} predictions in seed "
                          f"{seed}, e.g. {got.loc[got['_k'].duplicated(), '_k'].iloc[0]}")
    got = got.set_index("_k")
    want = key(convergence)
    missing = want[~want.isin(got.index)]
    if len(missing):
        raise SchemaError(f"end-to-end out of sample: run {missing.iloc[0]} has no stored {method} {protocol} "
                          f"prediction in seed {seed} (rerun rule convergence_evaluate)")
    col = HOLDOUT_COLUMN[protocol]
    held = got["held_out"].reindex(want).astype(str).to_numpy()
    own = convergence[col].astype(str).to_numpy()
    if (held != own).any():
        i = int(np.flatnonzero(held != own)[0])
        raise SchemaError(f"end-to-end out of sample: run {want.iloc[i]} ({col} {own[i]}) has a stored {method} "
                          f"prediction from fold {held[i]!r}: its own {col} was not held out")
    return pd.Series(pd.to_numeric(got["epochs_predicted"].reindex(want), errors="coerce").to_numpy(dtype=float),
                     index=convergence.index)


def end_to_end_pairs(iteration: pd.DataFrame, convergence: pd.DataFrame, predictions: pd.DataFrame,
                     specs: pd.DataFrame, seeds: Sequence[int], protocol: str = "lomo",
                     entry: tuple[str, str] = ("nested", "nested"), convergence_method: str = "nested",
                     convergence_factory: ConvergenceFactory | None = None,
                     epochs_predictions: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (seed, configuration, GPU) with out-of-sample predictions and measured values
    (:data:`PAIR_COLUMNS`). ``epochs_predictions``: rule ``convergence_evaluate``'s out-of-fold table of
    ``convergence_method``, read where it has the protocol and seed (:func:`stored_epochs`), refitted elsewhere."""
    from traintime.chronos.convergence import TARGET

    steps = step_time_pairs(iteration, predictions, protocol, entry)
    seeds = [int(s) for s in seeds]
    missing = sorted(set(seeds) - set(steps["seed"].astype(int)))
    if missing:
        raise SchemaError(f"end-to-end out of sample: no {protocol} step predictions for seed(s) {missing}")
    conv = convergence.reset_index(drop=True)
    prices = specs.set_index("gpu")["price_per_hour_usd"].to_dict()
    parts = []
    for seed in seeds:
        runs = conv[[*RUN_KEYS, "precision_bits", "dataset_size", TARGET]].copy()
        stored = stored_epochs(epochs_predictions, conv, protocol, convergence_method, seed)
        runs["epochs_predicted"] = (stored if stored is not None
                                    else epochs_out_of_fold(conv, protocol, convergence_method, seed,
                                                            convergence_factory))
        runs = runs.rename(columns={TARGET: "epochs_measured", "precision_bits": "run_precision_bits"})
        st = steps[steps["seed"] == seed]
        m = st.merge(runs, on=list(RUN_KEYS), how="inner")
        rp = pd.to_numeric(m["run_precision_bits"], errors="coerce")
        m = m[rp.isna() | (rp == pd.to_numeric(m["precision_bits"], errors="coerce"))].drop(columns="run_precision_bits")
        m["price_per_hour_usd"] = m["gpu"].map(prices).astype(float)
        n, b = m["dataset_size"].to_numpy(dtype=float), m["batch_size"].to_numpy(dtype=float)
        if not ((n > 0) & (b > 0)).all():
            raise SchemaError("end-to-end out of sample: a configuration has no positive dataset size or batch size")
        for side in ("predicted", "measured"):
            ep_s = epoch_seconds(m[f"step_ms_{side}"].to_numpy(dtype=float), 1.0, 1.0) * n / b  # N/B x step / 1000
            m[f"hours_{side}"] = total_hours(m[f"epochs_{side}"].to_numpy(dtype=float), ep_s)
            m[f"cost_usd_{side}"] = cost_usd(m[f"hours_{side}"], m["price_per_hour_usd"].to_numpy())
        parts.append(m)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PAIR_COLUMNS)
    if out.empty:
        raise SchemaError("end-to-end out of sample: no configuration has both a step-time prediction and a "
                          "convergence run")
    return out[PAIR_COLUMNS]


def hours_interval_held(p: pd.DataFrame, group: str, coverage: float = 0.9,
                        pool_below: int | None = None) -> np.ndarray:
    """Per pair of ``p`` (one seed), whether its measured hours lie in the ``coverage`` interval ``traintime
    predict`` would print (1.0 / 0.0; NaN: not scored): for each held-out ``group`` (the protocol's held-out column)
    of a family, split conformal (grouped by ``group``, no finite-sample correction) on the *other* groups' step
    residuals (one per pair) and epochs residuals (one per configuration) of that family, or of every family where
    the family has fewer other groups than ``pool_below`` (:func:`~traintime.chronos.conformal.stratum_pool`;
    None: :func:`~traintime.chronos.conformal.min_calibration_groups`, 0: the family's own however few), the two log
    half-widths in quadrature (:func:`~traintime.chronos.interval_math.combine_log_halfwidths`): the held-out
    half-widths of :func:`~traintime.chronos.conformal.grouped_coverage`. A pair whose step calibration has fewer
    than two groups is not scored."""
    from traintime.chronos.conformal import grouped_coverage, stratum_groups

    if p.empty:
        return np.zeros(0)
    fam, held = p["family"].astype(str), p[group].astype(str)
    qs = grouped_coverage(p["step_ms_measured"], p["step_ms_predicted"], held, coverage, finite_sample=False,
                          min_groups=2, strata=fam, pool_below=pool_below)["log_halfwidths"]
    runs = p.assign(_c=_config_id(p)).drop_duplicates("_c")
    run_key = stratum_groups(runs["family"], runs[group])
    qe_runs = grouped_coverage(runs["epochs_measured"], runs["epochs_predicted"], runs[group].astype(str), coverage,
                               finite_sample=False, strata=runs["family"], pool_below=pool_below)["log_halfwidths"]
    qe = pd.Series(stratum_groups(fam, held)).map(dict(zip(run_key, qe_runs))).to_numpy(dtype=float)
    qh = np.hypot(qs, qe)  # combine_log_halfwidths, per pair; NaN where either side was not calibrated
    r = np.abs(np.log(p["hours_measured"].to_numpy(float) / p["hours_predicted"].to_numpy(float)))
    return np.where(np.isfinite(qh), (r <= qh + 1e-12).astype(float), np.nan)


def _coverage_pct(held: pd.Series) -> float:
    h = held.dropna()
    return 100.0 * float(h.mean()) if len(h) else np.nan


def _seed_metrics(p: pd.DataFrame) -> dict[str, float]:
    """The metrics of one seed's pairs ``p`` (with the ``_held`` columns of :func:`end_to_end_summary`)."""
    cfg = _config_id(p)
    runs = p.assign(_c=cfg).drop_duplicates("_c")
    ape_h = np.abs(p["hours_predicted"] - p["hours_measured"]) / p["hours_measured"] * 100
    priced = p[p["price_per_hour_usd"].notna()].assign(_c=cfg)
    rho, hit, regret = [], [], []
    for _, g in priced.groupby("_c", sort=True):
        if len(g) < 2:
            continue
        rho.append(spearman(g["cost_usd_measured"], g["cost_usd_predicted"]))
        best_pred = g.loc[g["cost_usd_predicted"].idxmin()]
        best = float(g["cost_usd_measured"].min())
        hit.append(100.0 * float(best_pred["cost_usd_measured"] == best))
        regret.append(100.0 * (float(best_pred["cost_usd_measured"]) / best - 1.0))
    pc = p[p["price_per_hour_usd"].notna()]
    return {"step_mape_pct": mape(p["step_ms_measured"], p["step_ms_predicted"]),
            "epochs_mape_pct": mape(runs["epochs_measured"], runs["epochs_predicted"]),
            "hours_mape_pct": float(ape_h.mean()), "hours_median_ape_pct": float(ape_h.median()),
            "cost_mape_pct": mape(pc["cost_usd_measured"], pc["cost_usd_predicted"]) if len(pc) else np.nan,
            "cost_rank_spearman": float(np.nanmean(rho)) if rho else np.nan,
            "cost_top1_hit_pct": float(np.mean(hit)) if hit else np.nan,
            "cost_top1_regret_pct": float(np.mean(regret)) if regret else np.nan,
            "hours_interval_coverage_pct": _coverage_pct(p["_held"]),
            "hours_interval_coverage_own_family_pct": _coverage_pct(p["_held_own_family"]),
            "_n_configurations": float(runs.shape[0]), "_n_pairs": float(len(p))}


def end_to_end_summary(pairs: pd.DataFrame, protocol: str, entry: tuple[str, str],
                       convergence_method: str, coverage: float = 0.9) -> pd.DataFrame:
    """Per family and ``ALL``, every metric of :data:`METRICS`: mean, sd and 95 % t interval over seeds
    (:data:`SUMMARY_COLUMNS`). ``hours_interval_coverage_pct``: :func:`hours_interval_held` at ``coverage``,
    computed per seed over every family's pairs (a family with too few groups calibrates on every family's) and
    then shown per family and ``ALL``; ``hours_interval_coverage_own_family_pct``: the same calibrated on each
    family's own groups however few (the rule before pooling)."""
    rows = []
    group, pairs = HOLDOUT_COLUMN[protocol], pairs.reset_index(drop=True)
    held = {k: pd.concat([pd.Series(hours_interval_held(g, group, coverage, pool_below), index=g.index)
                          for _, g in pairs.groupby("seed", sort=True)]) for k, pool_below in
            (("_held", None), ("_held_own_family", 0))}
    pairs = pairs.assign(**held)
    for fam in [*sorted(pairs["family"].unique()), "ALL"]:
        sub = pairs if fam == "ALL" else pairs[pairs["family"] == fam]
        per_seed = [_seed_metrics(g) for _, g in sub.groupby("seed", sort=True)]
        for metric in METRICS:
            m, sd, lo, hi = mean_sd_ci95([s[metric] for s in per_seed])
            rows.append({"protocol": protocol, "step_entry": f"{entry[0]}+{entry[1]}",
                         "convergence_method": convergence_method, "family": fam, "metric": metric, "mean": m,
                         "sd": sd, "ci95_low": lo, "ci95_high": hi, "n_seeds": len(per_seed),
                         "n_configurations": int(per_seed[0]["_n_configurations"]),
                         "n_pairs": int(per_seed[0]["_n_pairs"])})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
