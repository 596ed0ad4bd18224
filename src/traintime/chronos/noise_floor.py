"""How reproducible the release's timing labels are: the floor under any step-time model's error.

The CHRONOS release measures every workload on every GPU three times, once per learning rate (the
learning-rate replicates). The learning rate does not change the work of a step, so the spread among the
replicates is measurement noise that no model of the step time can explain. Two numbers per label:

``oracle_mape_pct``
    the MAPE of the best single value per replicate group, chosen knowing the group's own labels (the
    weighted median minimising the group's MAPE). No predictor whose inputs are the same for the rows of a
    group (any step-time model: the learning rate is not a step-time feature) can score below it, even
    fitted on the test rows: a hard lower bound.
``loo_replicate_mape_pct``
    the MAPE of predicting each row by the median of the other replicates of its group: what a model that
    knew this workload's time on this GPU from the other runs would score (a realistic bar, noisier).

Targets stated against LOGO or LOMO errors (issue 13: compute time <= 15 %, step time <= 25 %) can only be
met if they lie above these floors; the tables put the floors next to them so a gap reads as model error,
not as noise in the labels.

Above the noise, how much of the labels' variation between GPUs a *class* of models can express at all
(:func:`fit_floor`, table ``iteration_fit_floor``): each class fitted in sample on every row, the held-out GPU
of a leave-one-GPU-out fold included - a time per workload plus one factor per GPU (a GPU as one speed), per GPU
and family, per GPU and model, per GPU, model and batch; or a power law per workload in the GPU's specs (the
functional form of the ``neighbour`` step model). A class whose in-sample error is above a target cannot meet it
on GPUs it never saw, short of a model outside the class.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError

#: Columns that identify one workload on one GPU in the release, all but the learning rate (the parameter
#: count and FLOPs separate architecture variants that share a model name, e.g. MLP-Mixer widths).
REPLICATE_KEY: tuple[str, ...] = ("family", "model", "dataset", "optimizer", "batch_size", "precision_bits", "amp",
                                  "gpu", "param_count", "flops_train_per_batch")
#: Timing labels of the release (milliseconds per step).
LABELS: tuple[str, ...] = ("compute_time_ms", "step_time_ms", "loader_wait_ms")


def best_constant_ape(values: np.ndarray) -> np.ndarray:
    """Absolute percentage errors of the MAPE-optimal constant for ``values`` (all > 0).

    sum_i |c / v_i - 1| = sum_i (1 / v_i) |c - v_i| is minimised by a median of the values weighted by
    1 / v_i; the lower weighted median is returned (any point between it and the next value ties)."""
    v = np.sort(np.asarray(values, dtype=float))
    if len(v) == 0 or not np.all(v > 0):
        raise ValueError("best_constant_ape needs one or more positive values")
    cw = np.cumsum(1.0 / v)
    c = v[int(np.searchsorted(cw, cw[-1] / 2.0))]
    return np.abs(c / v - 1.0) * 100.0


def loo_median_ape(values: np.ndarray) -> np.ndarray:
    """Absolute percentage error of each value predicted by the median of the others (two or more values)."""
    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        raise ValueError("loo_median_ape needs two or more values")
    return np.array([abs(np.median(np.delete(v, i)) / v[i] - 1.0) * 100.0 for i in range(len(v))])


def replicate_floor(rows: pd.DataFrame, labels: Sequence[str] = LABELS,
                    key: Sequence[str] = REPLICATE_KEY) -> pd.DataFrame:
    """One row per label and family (and ``ALL``): rows, replicate groups, replicates per group (median),
    oracle_mape_pct and loo_replicate_mape_pct (module doc). Groups of one row, or with a label <= 0 or
    missing, are left out and counted in ``rows_left_out``."""
    missing = [c for c in (*key, *labels) if c not in rows.columns]
    if missing:
        raise SchemaError(f"replicate_floor: iteration table lacks column(s) {missing}")
    out = []
    for label in labels:
        per_row: list[pd.DataFrame] = []
        left_out = {}
        for k, g in rows.groupby(list(key), dropna=False, sort=True):
            fam = k[list(key).index("family")] if "family" in key else "ALL"
            v = g[label].to_numpy(dtype=float)
            if len(v) < 2 or not np.all(np.isfinite(v) & (v > 0)):
                left_out[fam] = left_out.get(fam, 0) + len(v)
                continue
            per_row.append(pd.DataFrame({"family": fam, "group": len(per_row), "oracle": best_constant_ape(v),
                                         "loo": loo_median_ape(v)}))
        if not per_row:
            continue
        r = pd.concat(per_row, ignore_index=True)
        for fam, f in [*sorted(r.groupby("family")), ("ALL", r)]:
            sizes = f.groupby("group").size()
            out.append(dict(label=label, family=fam, rows=len(f), groups=len(sizes),
                            replicates_per_group=float(sizes.median()),
                            rows_left_out=sum(left_out.values()) if fam == "ALL" else left_out.get(fam, 0),
                            oracle_mape_pct=float(f["oracle"].mean()),
                            loo_replicate_mape_pct=float(f["loo"].mean()),
                            loo_replicate_median_ape_pct=float(f["loo"].median())))
    return pd.DataFrame(out)


#: spec columns of the per-workload power laws of :func:`fit_floor` (log10 of each)
POWER_LAW_SPECS: dict[str, tuple[str, ...]] = {
    "per-workload power law in FP32 peak and bandwidth": ("fp32_gflops", "memory_bandwidth_gbps"),
    "per-workload power law in FP32 peak, bandwidth and SM count": ("fp32_gflops", "memory_bandwidth_gbps", "sms"),
}
#: GPU cells of the additive classes of :func:`fit_floor`: class name -> columns whose values, with the GPU's, form
#: one cell that gets its own factor (None: the GPU is ignored)
ADDITIVE_CELLS: dict[str, tuple[str, ...] | None] = {
    "workload only (the GPU ignored)": None,
    "workload + GPU": (),
    "workload + GPU x family": ("family",),
    "workload + GPU x model": ("model",),
    "workload + GPU x (model, batch)": ("model", "batch_size"),
}


def _group_mean(ids: np.ndarray, v: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(ids, weights=v, minlength=n) / np.maximum(np.bincount(ids, minlength=n), 1)


def additive_fit(y: np.ndarray, workload: np.ndarray, cell: np.ndarray | None, tol: float = 1e-10,
                 max_iter: int = 10_000) -> np.ndarray:
    """Least-squares fit of ``y = a[workload] + b[cell]`` (integer ids; ``cell`` None: ``a`` only) by alternating
    group means (the two-way fixed-effects solution); returns the fitted values."""
    nw = int(workload.max()) + 1
    a = _group_mean(workload, y, nw)
    if cell is None:
        return a[workload]
    nc = int(cell.max()) + 1
    b = np.zeros(nc)
    for _ in range(max_iter):
        b_new = _group_mean(cell, y - a[workload], nc)
        a = _group_mean(workload, y - b_new[cell], nw)
        if np.max(np.abs(b_new - b)) < tol:
            break
        b = b_new
    return a[workload] + b_new[cell]


def power_law_fit(y: np.ndarray, workload: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Least-squares fit of ``y = c[workload] + x . s[workload]`` (one intercept and one slope per column of ``x`` for
    every workload; minimum-norm where a workload's GPUs do not determine them); returns the fitted values."""
    fitted = np.empty(len(y))
    order = np.argsort(workload, kind="stable")
    bounds = np.flatnonzero(np.diff(workload[order])) + 1
    for idx in np.split(order, bounds):
        design = np.column_stack([np.ones(len(idx)), x[idx]])
        coef = np.linalg.lstsq(design, y[idx], rcond=None)[0]
        fitted[idx] = design @ coef
    return fitted


def fit_floor(rows: pd.DataFrame, labels: Sequence[str] = ("compute_time_ms", "step_time_ms"),
              key: Sequence[str] = REPLICATE_KEY) -> pd.DataFrame:
    """How well model classes fit the labels *in sample*, every GPU included (module doc of the rule's table).

    A workload is a replicate group without its GPU (``key`` minus ``gpu``). Each class is fitted by least squares in
    log time on every row (the held-out GPU of a leave-one-GPU-out fold included), and scored by the MAPE of its
    fitted times, overall and per family. An in-sample fit of a class is optimistic for that class: a model of the
    class that never saw a GPU does worse on it, up to the distance between least squares in log time and the MAPE
    optimum. Classes: :data:`ADDITIVE_CELLS` (a factor per workload plus a factor per GPU cell) and
    :data:`POWER_LAW_SPECS` (per-workload power laws in GPU specs)."""
    need = [*key, *labels, *{c for cols in POWER_LAW_SPECS.values() for c in cols},
            *{c for cols in ADDITIVE_CELLS.values() if cols for c in cols}]
    missing = sorted({c for c in need if c not in rows.columns})
    if missing:
        raise SchemaError(f"fit_floor: iteration table lacks column(s) {missing}")
    wkey = [c for c in key if c != "gpu"]
    out = []
    for label in labels:
        t = rows[np.isfinite(rows[label].to_numpy(dtype=float)) & (rows[label].to_numpy(dtype=float) > 0)]
        y = np.log(t[label].to_numpy(dtype=float))
        workload = t.groupby(wkey, dropna=False, sort=True).ngroup().to_numpy()
        fits: dict[str, tuple[np.ndarray, int]] = {}
        for name, cols in ADDITIVE_CELLS.items():
            cell = None if cols is None else t.groupby(["gpu", *cols], dropna=False, sort=True).ngroup().to_numpy()
            n_par = workload.max() + 1 + (0 if cell is None else cell.max())
            fits[name] = (additive_fit(y, workload, cell), int(n_par))
        for name, cols in POWER_LAW_SPECS.items():
            x = np.log10(t[list(cols)].to_numpy(dtype=float))
            if not np.isfinite(x).all():
                raise SchemaError(f"fit_floor: GPU spec column(s) {list(cols)} have missing or non-positive values")
            fits[name] = (power_law_fit(y, workload, x), int((workload.max() + 1) * (len(cols) + 1)))
        for name, (fitted, n_par) in fits.items():
            ape = np.abs(np.exp(fitted - y) - 1.0) * 100.0
            row = {"label": label, "model_class": name, "parameters": n_par, "rows": len(t),
                   "workloads": int(workload.max() + 1), "gpus": int(t["gpu"].nunique()),
                   "mape_pct": float(ape.mean()), "median_ape_pct": float(np.median(ape))}
            for fam, idx in sorted(t.groupby("family").indices.items()):
                row[f"mape_pct_{fam}"] = float(ape[idx].mean())
            out.append(row)
    return pd.DataFrame(out)
