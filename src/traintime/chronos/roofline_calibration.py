"""Calibration and coverage of the intervals of ``traintime predict`` (rule ``predict_interval_coverage``).

Per family:

* the roofline step model (:class:`~traintime.chronos.roofline_step.RooflineStepTime`) fitted on every
  measured compute time of ``iteration.csv`` (saved as JSON; ``predict`` reads it instead of refitting);
* leave-one-GPU-out predictions (refitted without the held-out GPU) -> grouped split-conformal log
  half-width, with and without the finite-sample correction (``predict`` uses the one without: with 9-10
  GPUs or 3-4 models the corrected one is the largest residual or infinite), and the *measured* coverage of each: for
  every GPU the interval is calibrated on the other GPUs' out-of-fold residuals and checked on this GPU's
  rows (:func:`traintime.chronos.conformal.grouped_coverage`);
* epochs: the same for the convergence method's ``lomo`` out-of-fold predictions, grouped by model; a family with
  fewer models than :func:`~traintime.chronos.conformal.min_calibration_groups` (9 at 90 %; the release has 3-4 per
  family) is calibrated on every family's models (:func:`epochs_coverage_rows`).

The table has one row per (quantity, family, variant): nominal and measured coverage, rows, groups,
median interval factor (``exp(log half-width)``) and the out-of-fold MAPE of the point estimate; family
``all`` pools the held-out rows of every family, each row checked against its own family's interval (what
``predict`` does), so its coverage is the share of all held-out rows covered.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.conformal import (
    SplitConformal,
    grouped_coverage,
    min_calibration_groups,
    stratum_groups,
    stratum_pool,
)
from traintime.chronos.neighbour_frozen import SPEC_COLUMNS, kernel_shares
from traintime.chronos.roofline_step import RooflineStepTime
from traintime.core.metrics import ape, mape


#: measured column the step model is calibrated / checked against: compute time where the table has it
def measured_compute_ms(table: pd.DataFrame) -> tuple[pd.Series, str]:
    """``compute_time_ms`` (release: forward + backward + optimizer, loader wait excluded) where present,
    else ``step_time_ms`` (includes DataLoader wait); the name of the column used."""
    if "compute_time_ms" in table.columns and pd.to_numeric(table["compute_time_ms"], errors="coerce").gt(0).any():
        return pd.to_numeric(table["compute_time_ms"], errors="coerce"), "compute_time_ms"
    return pd.to_numeric(table["step_time_ms"], errors="coerce"), "step_time_ms (includes loader wait)"


#: modules of one block of each CHRONOS MLP / Transformer model as :func:`traintime.measure.analytic.model_structure`
#: counts them (Conv2d + Linear modules, BatchNorm2d and activation calls), and the stem and head outside the blocks
#: (patch embedding + classifier): the release's ``depth`` of these families counts *blocks*, while the analytic walk
#: (the trace rows, ``predict``'s own models) counts modules. Mixer: token MLP and channel MLP, 2 Linear + GELU each;
#: ResMLP: token Linear, channel MLP 2 Linear + GELU; AS-MLP (the project's build): 2 projections + channel MLP;
#: DeiT / ViT: qkv, proj, fc1, fc2 + GELU; DistilBERT (not built here: Hugging Face's layer): q, k, v, out, 2 FFN
#: Linear + GELU, head pre-classifier + classifier. tests/test_predict_static.py checks every buildable one
#: against the walk of :mod:`traintime.measure.models` at two depths.
BLOCK_MODULES: dict[str, tuple[int, int]] = {"mixer": (6, 2), "resmlp": (4, 2), "asmlp": (4, 2), "DeiT-Tiny": (5, 2),
                                             "ViT": (5, 2), "DistilBERT": (7, 2)}


def analytic_layers(table: pd.DataFrame) -> pd.Series:
    """Kernel-launching layers per forward pass (``layers`` of a step row) in the analytic walk's units:
    ``conv_linear_modules + bn_layers + act_layers`` where a row has the walk's module count (rows this project
    measured, :func:`traintime.measure.analytic.analytic_features`), else ``depth + bn_layers + act_layers`` (the
    release's CNN columns are that walk's counts), except for the release's models of :data:`BLOCK_MODULES`, whose
    ``depth`` counts blocks: modules per block x depth + stem and head."""
    def num(c: str) -> pd.Series | int:
        return pd.to_numeric(table[c], errors="coerce").fillna(0) if c in table.columns else 0

    calls = num("bn_layers") + num("act_layers")
    out = pd.Series(num("depth") + calls, index=table.index, dtype=float)
    if "model" in table.columns:
        per = table["model"].map({m: b for m, (b, _) in BLOCK_MODULES.items()})
        stem = table["model"].map({m: c for m, (_, c) in BLOCK_MODULES.items()})
        out = out.where(per.isna(), per * num("depth") + stem)
    if "conv_linear_modules" in table.columns:
        walk = pd.to_numeric(table["conv_linear_modules"], errors="coerce")
        out = out.where(walk.isna(), walk + calls)
    return out.astype(float)


def iteration_step_rows(table: pd.DataFrame, specs: pd.DataFrame) -> pd.DataFrame:
    """Measured ``iteration`` rows -> step-model rows (release columns mapped to ours) with ``measured_ms``."""
    t = table.copy()
    if "status" in t.columns:
        t = t[t["status"] == "ok"]
    t["measured_ms"], t.attrs["measured"] = measured_compute_ms(t)
    t = t[t["measured_ms"].gt(0)]
    spec_cols = ["fp32_gflops", "fp16_gflops", "memory_bandwidth_gbps"] + [c for c in SPEC_COLUMNS.values()
                                                                           if c in specs.columns]
    t = t.drop(columns=[c for c in spec_cols if c in t.columns])
    t = t.merge(specs[["gpu", *spec_cols]].drop_duplicates("gpu"), on="gpu", how="inner")
    t["precision"] = np.where(pd.to_numeric(t["precision_bits"], errors="coerce") == 16, "16", "32")
    t["act_bytes_per_sample"] = pd.to_numeric(t.get("act_bytes_per_sample_proxy"), errors="coerce").fillna(0)
    t["layers"] = analytic_layers(t)
    for c in ("param_bytes", "optimizer_state_bytes", "flops_train_per_batch"):
        t[c] = pd.to_numeric(t.get(c), errors="coerce")
    t["grad_bytes"] = pd.to_numeric(t["grad_bytes"], errors="coerce") if "grad_bytes" in t.columns else t["param_bytes"]
    for c, v in kernel_shares(t).items():  # the release's forward FLOPs are its hook total: the fractions are shares
        t[c] = v
    out = t.dropna(subset=["flops_train_per_batch", "param_bytes", "memory_bandwidth_gbps", "fp32_gflops"])
    out.attrs["measured"] = measured_compute_ms(table)[1]
    return out


def logo_step_predictions(rows: pd.DataFrame, model: RooflineStepTime | None = None, by: str = "gpu") -> np.ndarray:
    """Leave-one-GPU-out predictions of the roofline on step-model ``rows`` with ``measured_ms`` (``by``: another
    group column, e.g. ``model`` or ``dataset``, for leave-one-model / dataset-out)."""
    from sklearn.base import clone

    base = model or RooflineStepTime()
    y = rows["measured_ms"].to_numpy(dtype=float)
    preds = np.full(len(rows), np.nan)
    for g in rows[by].unique():
        test = (rows[by] == g).to_numpy()
        preds[test] = clone(base).fit(rows[~test], y[~test]).predict(rows[test])
    return preds


def _coverage_row(quantity: str, family: str, variant: str, coverage: float, hits: np.ndarray, n_groups: int,
                  q_all: float, median_q: float, y: np.ndarray, p: np.ndarray,
                  extra: dict[str, Any]) -> dict[str, Any]:
    """One row of the table: ``hits`` of the scored held-out rows, ``q_all`` the log half-width calibrated on every
    group, ``median_q`` the median over the held-out groups of theirs, ``y`` / ``p`` all rows of the family."""
    return {"quantity": quantity, "family": family, "variant": variant, "nominal_coverage": coverage,
            "measured_coverage": float(np.mean(hits)) if len(hits) else float("nan"), "rows": len(hits),
            "groups": n_groups, "interval_factor_all_groups": math.exp(q_all),
            "median_interval_factor_held_out": math.exp(median_q), "oof_mape_pct": mape(y, p), **extra,
            "covered": int(np.sum(hits)), "ape_sum": float(np.sum(ape(y, p))), "ape_rows": len(y)}


def _coverage_rows(quantity: str, family: str, y: np.ndarray, p: np.ndarray, groups: np.ndarray,
                   coverage: float, extra: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for finite in (True, False):
        cov = grouped_coverage(y, p, groups, coverage, finite_sample=finite)
        q = SplitConformal(coverage, finite).fit(y, p, groups).log_halfwidth
        hits = np.array([h for h in cov["hits"] if h is not None], dtype=bool)
        out.append(_coverage_row(quantity, family, "finite-sample (guarantee)" if finite else "empirical quantile",
                                 coverage, hits, cov["groups"], q, cov["median_log_halfwidth"], y, p, extra))
    return out


#: family label of the pooled rows of :func:`pooled_rows`
ALL_FAMILIES = "all"


def pooled_rows(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` plus, per (quantity, variant), a row of family :data:`ALL_FAMILIES`: the held-out rows of every
    family, each against its own family's interval (measured coverage = covered rows / rows)."""
    if table.empty:
        return table
    keys = ["quantity", "variant"]
    agg = table.groupby(keys, sort=False).agg(
        nominal_coverage=("nominal_coverage", "first"), covered=("covered", "sum"), rows=("rows", "sum"),
        groups=("groups", "sum"), ape_sum=("ape_sum", "sum"), ape_rows=("ape_rows", "sum"),
        against=("against", "first")).reset_index()
    agg["family"] = ALL_FAMILIES
    agg["measured_coverage"] = agg["covered"] / agg["rows"]
    agg["oof_mape_pct"] = agg["ape_sum"] / agg["ape_rows"]
    out = pd.concat([table, agg[[c for c in table.columns if c in agg.columns]]], ignore_index=True)
    quantity = {q: i for i, q in enumerate(dict.fromkeys(table["quantity"]))}
    out = out.assign(_q=out["quantity"].map(quantity), _all=out["family"].eq(ALL_FAMILIES))
    out = out.sort_values(["_q", "_all"], kind="mergesort")  # per quantity: its families, then the pooled rows
    return out.drop(columns=["_q", "_all", "covered", "ape_sum", "ape_rows"]).reset_index(drop=True)


def calibrate(iteration: pd.DataFrame, specs: pd.DataFrame, coverage: float = 0.9,
              convergence_predictions: pd.DataFrame | None = None,
              method: str = "") -> tuple[dict[str, Any], pd.DataFrame]:
    """(calibration JSON: per family fitted constants + step log half-width, coverage table)."""
    rows = iteration_step_rows(iteration, specs)
    measured = rows.attrs.get("measured", "")
    cal: dict[str, Any] = {"coverage": coverage, "measured_column": measured, "families": {}}
    table: list[dict[str, Any]] = []
    for fam in sorted(rows["family"].unique()):
        r = rows[rows["family"] == fam]
        y = r["measured_ms"].to_numpy(dtype=float)
        groups = r["gpu"].to_numpy()
        if len(np.unique(groups)) < 3:
            continue
        p = logo_step_predictions(r)
        full = RooflineStepTime().fit(r, y)
        q = SplitConformal(coverage, finite_sample=False).fit(y, p, groups).log_halfwidth
        qf = SplitConformal(coverage).fit(y, p, groups).log_halfwidth
        cal["families"][fam] = {**full.get_params(), "rows": int(len(r)), "gpus": sorted(map(str, set(groups))),
                                "step_log_halfwidth": q, "step_log_halfwidth_finite_sample": qf,
                                "logo_mape_pct": mape(y, p)}
        table += _coverage_rows("step_ms (roofline, leave-one-GPU-out)", fam, y, p, groups, coverage,
                                {"against": measured, "calibrated_on": f"{fam} GPUs"})
    if convergence_predictions is not None and len(convergence_predictions):
        table += epochs_coverage_rows(convergence_predictions, method, coverage)
    return cal, pooled_rows(pd.DataFrame(table))


#: variant of the epochs rows calibrated on the family's own models however few (the rule before pooling)
OWN_FAMILY_VARIANT = "empirical quantile, own family only (before)"


def epochs_coverage_rows(convergence_predictions: pd.DataFrame, method: str, coverage: float) -> list[dict[str, Any]]:
    """Coverage rows of the epoch interval on the ``lomo`` out-of-fold predictions, per family and variant: each
    held-out model's interval calibrated on the other models of its family, or of every family where its family has
    fewer than :func:`~traintime.chronos.conformal.min_calibration_groups` (``calibrated_on``; as ``traintime
    predict`` calibrates, :func:`traintime.predict_plan.epochs_conformal`); :data:`OWN_FAMILY_VARIANT` beside them.
    None with fewer than 3 models in all."""
    c = convergence_predictions[convergence_predictions["protocol"] == "lomo"]
    c = c[(c["epochs_measured"] > 0) & (c["epochs_predicted"] > 0)].reset_index(drop=True)
    if c.groupby(["family", "model"]).ngroups < 3:
        return []
    y, p = c["epochs_measured"].to_numpy(float), c["epochs_predicted"].to_numpy(float)
    models, fams = c["model"].astype(str).to_numpy(), c["family"].astype(str).to_numpy()
    m = min_calibration_groups(coverage)
    out = []
    for finite, pool_below, variant in ((True, None, "finite-sample (guarantee)"), (False, None, "empirical quantile"),
                                        (False, 0, OWN_FAMILY_VARIANT)):
        cov = grouped_coverage(y, p, models, coverage, finite_sample=finite, strata=fams, pool_below=pool_below)
        held = np.array([h is not None for h in cov["hits"]])
        hit = np.array([bool(h) for h in cov["hits"]])
        for fam in sorted(set(fams)):
            f = fams == fam
            cal, pooled = stratum_pool(models, fams, fam, coverage, pool_below=pool_below)
            q = SplitConformal(coverage, finite).fit(y[cal], p[cal], stratum_groups(fams[cal], models[cal])).q_
            scored = f & held
            per_group = pd.Series(cov["log_halfwidths"][scored]).groupby(models[scored]).first()
            out.append(_coverage_row(
                f"epochs ({method}, leave-one-model-out)", fam, variant, coverage, hit[scored],
                len(np.unique(models[f])), q, float(np.median(per_group)) if len(per_group) else float("nan"),
                y[f], p[f], {"against": "epochs_measured", "calibrated_on": f"every family's models (fewer than {m} "
                             f"{fam})" if pooled else f"{fam} models"}))
    return out


def load_calibration(path: Any) -> dict[str, Any] | None:
    """The saved calibration JSON, or None when the file does not exist."""
    import json
    from pathlib import Path

    p = Path(path)
    return json.loads(p.read_text()) if p.exists() else None


def model_from_calibration(cal: dict[str, Any], family: str) -> RooflineStepTime | None:
    fam = cal.get("families", {}).get(family)
    if not fam:
        return None
    m = RooflineStepTime(compute_efficiency=fam["compute_efficiency"], memory_efficiency=fam["memory_efficiency"],
                         launch_us=fam["launch_us"])
    m.fitted_ = True
    return m


def calibrate_with_local(iteration: pd.DataFrame, local: pd.DataFrame | None, specs: pd.DataFrame,
                         train_on: str = "released_and_local", coverage: float = 0.9,
                         convergence_predictions: pd.DataFrame | None = None,
                         method: str = "") -> tuple[dict[str, Any], pd.DataFrame]:
    """:func:`calibrate` on the released rows plus the merged local rows of GPUs in ``specs`` (a CPU row
    has no roofline: left out), per ``train_on`` (:mod:`traintime.measure.training_rows`); the JSON
    records them under ``training_data``."""
    from traintime.measure.training_rows import combine_gpu_rows

    table, summary = combine_gpu_rows(iteration, local, specs["gpu"], train_on)
    cal, cov = calibrate(table, specs, coverage, convergence_predictions, method)
    cal["training_data"] = summary
    return cal, cov
