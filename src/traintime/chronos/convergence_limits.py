"""What limits the accuracy of epochs-to-converge estimates on the released data (issue 14).

The release trains each (model, dataset, optimizer) group once per learning rate x batch size (a 3 x 3 grid,
one seed per run), so its T_conv labels mix the effect of the learning rate and batch size with seed noise.
Two questions decide whether a target can be met, and each has a measured answer here.

5-fold CV (a configuration group is seen in training)
    ``group_oracle_constant``: the MAPE of the best single value per group, chosen on the group's own runs
    (the MAPE-optimal constant of :func:`traintime.chronos.noise_floor.best_constant_ape`). It is a hard lower
    bound for every predictor that gives the runs of a group one value (a lookup table, partial pooling), even
    one fitted on the test rows. ``group_median_all_runs`` (the group's median, test row included) and
    ``group_median_other_runs`` (the median of the group's other runs: a lookup table that saw 8 of the 9)
    put that bound next to what a lookup table can reach. A learned model goes below the bound only by
    predicting how the learning rate and batch size move T_conv inside a group, from one seed per grid point.
Leave one model out (the model is never seen)
    ``lomo_as_measured`` against ``lomo_model_offset_oracle``: each method's LOMO predictions as evaluated,
    and the same predictions divided by the held-out model's geometric-mean ratio predicted / measured (an
    oracle that knew how much longer or shorter that model trains on average). What stays is the error in how
    the unseen model's epochs vary over datasets, optimizers, learning rates and batch sizes; no estimate of a
    per-model level, however good, removes it.

Every figure is the paper's "Average": the mean of the per-model MAPEs of its nine models
(:data:`~traintime.data.chronos_convergence.PAPER_MODELS`), per family and over all nine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.chronos.convergence import _require
from traintime.chronos.noise_floor import best_constant_ape, loo_median_ape
from traintime.core.errors import SchemaError
from traintime.core.metrics import mean_sd
from traintime.data.chronos_convergence import PAPER_MODELS

#: One configuration group of the release: runs that differ only in learning rate and batch size.
GROUP_KEY: tuple[str, ...] = ("family", "model", "dataset", "optimizer")
TARGET = "epochs_to_converge"
#: The 9-model average over all families.
ALL = "9 paper models"


def _paper_average(ape: pd.Series, family: pd.Series, model: pd.Series,
                   paper_models: Sequence[str]) -> dict[str, float]:
    """Mean of per-model MAPEs of the paper's models, per family and over all (key :data:`ALL`)."""
    per_model = pd.DataFrame({"ape": ape.to_numpy(), "family": family.to_numpy(), "model": model.to_numpy()})
    per_model = per_model[per_model["model"].isin(paper_models)]
    pm = per_model.groupby(["family", "model"], sort=True)["ape"].mean()
    out = {str(f): float(g.mean()) for f, g in pm.groupby(level="family")}
    out[ALL] = float(pm.mean()) if len(pm) else float("nan")
    return out


def group_oracle(rows: pd.DataFrame, paper_models: Sequence[str] = PAPER_MODELS) -> pd.DataFrame:
    """Per-group bounds on the released runs: columns quantity, family, runs, groups, avg_model_mape_pct.

    Groups with a single run have no spread to measure and are left out (their runs are not counted)."""
    _require(rows, [*GROUP_KEY, TARGET], "group_oracle")
    y = pd.to_numeric(rows[TARGET], errors="coerce").to_numpy(dtype=float)
    if not np.all(np.isfinite(y) & (y > 0)):
        raise SchemaError(f"group_oracle: {TARGET} must be positive and finite on every row")
    apes = {q: np.full(len(rows), np.nan) for q in ("group_oracle_constant", "group_median_all_runs",
                                                    "group_median_other_runs")}
    keys = rows[list(GROUP_KEY)].astype(str).agg("|".join, axis=1).to_numpy()
    n_groups = 0
    for k in np.unique(keys):
        idx = np.flatnonzero(keys == k)
        if len(idx) < 2:
            continue
        n_groups += 1
        v = y[idx]
        apes["group_oracle_constant"][idx] = best_constant_ape(v)
        apes["group_median_all_runs"][idx] = np.abs(np.median(v) / v - 1.0) * 100.0
        apes["group_median_other_runs"][idx] = loo_median_ape(v)
    used = np.isfinite(apes["group_oracle_constant"])
    out = []
    for q, a in apes.items():
        avg = _paper_average(pd.Series(a[used]), rows["family"].astype(str)[used], rows["model"].astype(str)[used],
                             paper_models)
        for fam, v in avg.items():
            out.append(dict(protocol="cv", quantity=q, method="", family=fam, n_seeds=1, avg_model_mape_pct=v,
                            sd_pct=np.nan, runs=int(used.sum()), groups=n_groups))
    return pd.DataFrame(out)


def model_offset_oracle(preds: pd.DataFrame, paper_models: Sequence[str] = PAPER_MODELS) -> pd.DataFrame:
    """LOMO error as measured and with the held-out model's mean log ratio removed, per method, family and seed
    summarised over seeds: columns protocol, quantity, method, family, n_seeds, avg_model_mape_pct, sd_pct.

    ``preds``: out-of-fold predictions as written by rule ``convergence_evaluate`` (only ``lomo`` rows are used)."""
    cols = ["protocol", "method", "seed", "family", "model", "epochs_measured", "epochs_predicted"]
    _require(preds, cols, "model_offset_oracle")
    lomo = preds[preds["protocol"] == "lomo"]
    if lomo.empty:
        raise SchemaError("model_offset_oracle: no lomo predictions in the input")
    per_seed = []
    for (method, seed), g in lomo.groupby(["method", "seed"], sort=True):
        meas = g["epochs_measured"].to_numpy(dtype=float)
        pred = g["epochs_predicted"].to_numpy(dtype=float)
        if not (np.all(meas > 0) and np.all(pred > 0)):
            raise SchemaError(f"model_offset_oracle: {method} seed {seed} has non-positive epochs")
        log_ratio = pd.Series(np.log(pred / meas), index=g.index)
        offset = log_ratio.groupby(g["model"]).transform("mean").to_numpy()
        for q, p in (("lomo_as_measured", pred), ("lomo_model_offset_oracle", pred / np.exp(offset))):
            ape = pd.Series(np.abs(p / meas - 1.0) * 100.0)
            for fam, v in _paper_average(ape, g["family"].astype(str), g["model"].astype(str), paper_models).items():
                per_seed.append(dict(quantity=q, method=method, family=fam, seed=seed, mape=v))
    df = pd.DataFrame(per_seed)
    out = []
    for (q, method, fam), g in df.groupby(["quantity", "method", "family"], sort=False):
        m, sd = mean_sd(g["mape"])
        out.append(dict(protocol="lomo", quantity=q, method=method, family=fam, n_seeds=len(g),
                        avg_model_mape_pct=m, sd_pct=sd, runs=np.nan, groups=np.nan))
    return pd.DataFrame(out)


#: Target MAPE (%) of issue 14 per protocol.
TARGETS: dict[str, float] = {"cv": 18.0, "lomo": 25.0}
#: Methods whose LOMO rows are shown: the released model, its no-probe ablation, the bar and the learned models
#: (constants and lookup tables have no model-specific level to remove).
LOMO_METHODS: tuple[str, ...] = ("chronos_rf", "chronos_xgb", "no_probe_rf", "partial_pooling", "pooled_loglinear",
                                 "xgb_monotone", "xgb_probe", "pooled_or_xgb", "nested")
QUANTITIES: tuple[str, ...] = ("group_oracle_constant", "group_median_all_runs", "group_median_other_runs",
                               "lomo_as_measured", "lomo_model_offset_oracle")


def convergence_limits(rows: pd.DataFrame, preds: pd.DataFrame, methods: Sequence[str] = LOMO_METHODS,
                       paper_models: Sequence[str] = PAPER_MODELS) -> pd.DataFrame:
    """Both parts stacked with issue 14's target per protocol: columns protocol, quantity, method, family,
    n_seeds, avg_model_mape_pct, sd_pct, runs, groups, target_pct. Quantities in :data:`QUANTITIES` order,
    then method, families alphabetical and the 9-model average last. The LOMO part covers the ``methods``
    present in ``preds`` and is left out when ``preds`` has no LOMO rows of them."""
    parts = [group_oracle(rows, paper_models)]
    _require(preds, ["protocol", "method"], "convergence_limits")
    lomo = preds[(preds["protocol"] == "lomo") & preds["method"].isin(list(methods))]
    if not lomo.empty:
        parts.append(model_offset_oracle(lomo, paper_models))
    out = pd.concat(parts, ignore_index=True)
    out["target_pct"] = out["protocol"].map(TARGETS)
    out = out.assign(_q=out["quantity"].map({q: i for i, q in enumerate(QUANTITIES)}), _all=out["family"] == ALL)
    out = out.sort_values(["_q", "method", "_all", "family"], kind="mergesort")
    return out.drop(columns=["_q", "_all"]).reset_index(drop=True)
