"""Tables of the seed study, the curve extrapolation and the interval coverage (rule convergence_seed_tables)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from traintime.chronos.conformal import min_calibration_groups
from traintime.chronos.convergence_noise import (
    PREDICT_CURVE_FAMILY,
    curve_extrapolation_errors,
    curve_interval_coverage,
    curve_summary,
    interval_coverage,
    pooled_log_sd,
    seed_noise_floor,
    seed_spread,
    versus_baseline,
)
from traintime.chronos.convergence_tables import summary_seed_metrics
from traintime.core.io import read_csv, to_markdown, write_csv, write_text

_LOCAL_NOTE = ("Local runs on this machine's device (CPU here): small models (ResMLP, MLP-Mixer) on the "
               "offline `digits` dataset (sklearn's 8x8 digits upsampled), early stopping with the seed study's "
               "patience / min_delta / max_epochs (config `collect.convergence.seed_study`). They are far smaller "
               "than the released CHRONOS runs; numbers show the method, not the paper's regime.")


def write_seed_tables(row_paths: Sequence[str], curve_paths: Sequence[str], prediction_paths: Sequence[str],
                      out: Mapping[str, str], ks: Sequence[int] = (1, 2, 3, 5), coverage: float = 0.9) -> None:
    """Merge the seed-study runs and curves, then write the spread, curve-extrapolation and coverage
    tables (csv + md) to the paths of ``out`` (keys as in rule convergence_seed_tables)."""
    runs = pd.concat([read_csv(p) for p in row_paths], ignore_index=True) if row_paths else pd.DataFrame()
    curves = pd.concat([read_csv(p) for p in curve_paths], ignore_index=True) if curve_paths else pd.DataFrame()
    if not runs.empty:
        runs = runs.sort_values(["run_id", "seed"]).reset_index(drop=True)
        curves = curves.sort_values(["run_id", "seed", "epoch"]).reset_index(drop=True)
    write_csv(runs, out["runs"])
    write_csv(curves, out["curves"])

    spread = seed_spread(runs) if not runs.empty else pd.DataFrame()
    s_log = pooled_log_sd(spread) if not spread.empty else float("nan")
    write_csv(spread, out["spread_csv"])
    floor = seed_noise_floor(runs) if not runs.empty else float("nan")
    write_text("# Seed spread of the stopping epoch T_conv (local seed study)\n\n" + _LOCAL_NOTE + "\n\n"
               + (to_markdown(spread) if not spread.empty else "(no seed-study runs configured)\n")
               + f"\nPooled within-configuration sd of log10 T_conv: {s_log:.4f} "
               f"(a factor of {10 ** s_log:.3f}). Seed-noise floor: predicting each seed's T_conv by the median "
               f"of the other seeds of its configuration gives MAPE {floor:.1f} %.\n", out["spread_md"])

    if not runs.empty:
        # the prior-fitted families, and the extrapolation traintime predict --curve makes (exp, generic prior)
        plain = curve_extrapolation_errors(curves, runs, ks, families=("exp",), with_prior=False)
        errors = pd.concat([curve_extrapolation_errors(curves, runs, ks), plain.assign(family=PREDICT_CURVE_FAMILY)],
                           ignore_index=True)
        summary = curve_summary(errors).merge(curve_interval_coverage(errors, coverage), on=["family", "k"],
                                              how="left")
    else:
        errors, summary = pd.DataFrame(), pd.DataFrame()
    write_csv(summary, out["curve_csv"])
    write_csv(errors, out["curve_csv"].replace(".csv", "_runs.csv"))
    write_text("# Stopping epoch from the first k validation losses (curve extrapolation)\n\n" + _LOCAL_NOTE
               + "\n\nA parametric curve (`exp`: a + b exp(-c (t-1)); `power`: a + b t^-c) is fitted to the first "
               "k validation losses of each run with a prior from the complete curves of the other configurations "
               "(leave one configuration out), extrapolated, and the run's early-stopping rule is replayed on it. "
               "MAPE over converged runs still training after k epochs; `no_curve_median_mape_pct`: predicting "
               f"the median T_conv of the other configurations. `{PREDICT_CURVE_FAMILY}`: the `exp` fit with its "
               "generic prior instead, the extrapolation `traintime predict --curve` makes. `interval_coverage_pct`: "
               f"how often the {100 * coverage:.0f} % interval `predict` would print (split conformal on the other "
               "configurations' errors, grouped by configuration) held a run of a configuration left out "
               "(`interval_runs` runs; `interval_factor`: median upper bound / estimate). With a handful of "
               "configurations these are coarse.\n\n"
               + (to_markdown(summary) if not summary.empty else "(no runs)\n"), out["curve_md"])

    preds = pd.concat([read_csv(p) for p in prediction_paths], ignore_index=True)
    vs = versus_baseline(summary_seed_metrics(preds))
    write_csv(vs, out["versus_csv"])
    write_text("# Convergence estimators against the partial-pooling baseline and the issue's targets\n\n"
               "Nine-model average MAPE (%) of T_conv on the released data (same folds and seeds as "
               "convergence_summary), mean over seeds. `better_than_baseline_by`: partial_pooling minus the "
               "method (points); `clears_margin`: at least 3 points better. Targets: 5-fold CV <= 18 %, "
               f"LOMO <= 25 %. Seed-noise floor measured locally (digits runs, not the released regime): "
               f"{floor:.1f} % MAPE for a perfect configuration-level predictor.\n\n" + to_markdown(vs)
               + nested_choices_note(preds), out["versus_md"])
    cov = interval_coverage(preds, s_log, coverage)
    agg = (cov.groupby(["protocol", "method", "interval"], sort=False)
           .agg(n_seeds=("seed", "nunique"), n_runs=("n_runs", "first"), coverage_mean_pct=("coverage_pct", "mean"),
                coverage_sd_pct=("coverage_pct", "std"), target_pct=("target_pct", "first"),
                median_width_ratio=("median_width_ratio", "mean")).reset_index())
    write_csv(agg, out["coverage_csv"])
    write_text(f"# Coverage of {100 * coverage:.0f} % epoch intervals on the released data's folds\n\n"
               "Out-of-fold predictions of each method (released CHRONOS data, 324 runs, one seed each). For each "
               "held-out fold the interval is the one `traintime predict` prints, calibrated on the other folds of the "
               f"same family, or of every family where the family has fewer than {min_calibration_groups(coverage)} "
               "other folds (runs under CV; fewer cannot reach the nominal coverage: the release has 3-5 models or "
               "datasets per family): split conformal on |ln(measured / predicted)| (`residual`: model error plus the "
               "one seed draw each released label holds; grouped by held-out fold, one residual per run under CV), "
               "or that half-width floored at the seed spread measured locally (`seed_floored`, the rule `predict` "
               f"applies: max(q, z s), pooled sd of log10 T_conv = {s_log:.4f}, times ln 10; local digits runs, "
               "not the released "
               "regime; not added in quadrature, which would count seed noise twice). Target: 85-95 % of held-out "
               "runs covered. `median_width_ratio`: upper / lower bound. `residual_own_family`: `residual` calibrated "
               "on the family's own other folds however few (the rule before; beside it for comparison).\n\n"
               + to_markdown(agg), out["coverage_md"])


def nested_choices_note(preds: pd.DataFrame) -> str:
    """A paragraph counting, per protocol, the outer folds (family x held-out fold x seed) in which ``nested`` chose
    each candidate (column ``chosen`` of its out-of-fold predictions); empty without ``nested`` rows."""
    if "chosen" not in preds.columns:
        return ""
    n = preds[(preds["method"] == "nested") & preds["chosen"].notna()]
    if n.empty:
        return ""
    folds = n.drop_duplicates(["protocol", "seed", "family", "held_out"])
    parts = []
    for proto, g in folds.groupby("protocol", sort=False):
        counts = g["chosen"].value_counts()
        parts.append(f"{proto}: " + ", ".join(f"{k} {v}" for k, v in counts.items()) + f" of {len(g)}")
    return ("\n`nested` chose, counted over outer folds (family x held-out fold x seed): " + "; ".join(parts)
            + ".\n")
