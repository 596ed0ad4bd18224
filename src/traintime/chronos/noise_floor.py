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
