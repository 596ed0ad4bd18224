"""How a measured step time grows with batch, and the out-of-fold step-time error by that growth (a diagnostic).

A network timed on one GPU at several batches shows how much of its step is work: the exponent
``s = log(t(b_max) / t(b_min)) / log(b_max / b_min)`` of its measured times (medians per batch) is about 1 when the
step is all work that grows with the batch, and about 0 when the step takes the same time whatever the batch - a
fixed per-step cost of the host that ran it (Python dispatch, kernel launches, synchronisation), which no GPU spec
describes. :func:`batch_scaling_class` puts each row in one class of :data:`CLASSES` by the exponent of its own
network on its own GPU; :func:`errors_by_scaling` gives the out-of-fold error of each step-time method per class.

The class is read from the measured times of the held-out GPU itself, so it is a diagnostic of where the error sits,
never a feature of any model. Example (CHRONOS release): the Transformer rows of an A100 take 23-24 ms per step at
every batch from 4 to 64 - on that cloud host the step is host-bound, and a model of the GPU cannot know the host.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: row classes by the batch exponent ``s`` of its network on its GPU (module doc), in table order
CLASSES: tuple[str, ...] = ("flat in batch (s < 0.25)", "partly (0.25 <= s < 0.75)", "grows with batch (s >= 0.75)",
                            "one batch measured")
#: what identifies a network on a GPU (each measured at one or more batches)
NETWORK_ON_GPU: tuple[str, ...] = ("source", "gpu", "model", "img_px", "precision")


def batch_exponent(data: pd.DataFrame, time_column: str = "measured_ms") -> pd.Series:
    """Per row: the batch exponent ``s`` of its network on its GPU (:data:`NETWORK_ON_GPU`; median time per batch,
    smallest against largest batch); NaN where that network was measured at one batch only."""
    key = [data[c].astype(str) for c in NETWORK_ON_GPU]
    med = data.groupby([*key, data["batch_size"].astype(float)])[time_column].median()
    med.index = med.index.set_names([*NETWORK_ON_GPU, "batch"])
    per = med.reset_index().sort_values("batch").groupby(list(NETWORK_ON_GPU))
    first, last = per.first(), per.last()
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.log(last[time_column] / first[time_column]) / np.log(last["batch"] / first["batch"])
    s[last["batch"] <= first["batch"]] = np.nan
    idx = pd.MultiIndex.from_arrays(key, names=list(NETWORK_ON_GPU))
    return pd.Series(s.reindex(idx).to_numpy(), index=data.index, name="batch_exponent")


def batch_scaling_class(data: pd.DataFrame, time_column: str = "measured_ms") -> pd.Series:
    """Per row: its class of :data:`CLASSES` (module doc)."""
    s = batch_exponent(data, time_column).to_numpy()
    out = np.select([s < 0.25, s < 0.75, s >= 0.75], list(CLASSES[:3]), default=CLASSES[3])
    return pd.Series(out, index=data.index, name="batch_scaling")


def errors_by_scaling(data: pd.DataFrame, pred: pd.DataFrame,
                      protocols: tuple[str, ...] = ("chronos LOGO", "traces LOGO")) -> pd.DataFrame:
    """Out-of-fold error per protocol, method and batch-scaling class: rows, share of the protocol's rows, MAPE,
    median APE and geometric mean of predicted / measured. ``pred``: protocol, method, row (position in ``data``),
    pred_ms (as :func:`traintime.predict_step_grouped.grouped_predictions`); ``data``: ``measured_ms`` and
    :data:`NETWORK_ON_GPU`, ``batch_size``."""
    cls = batch_scaling_class(data).to_numpy()
    y = data["measured_ms"].to_numpy(dtype=float)
    out = []
    for (proto, method), g in pred[pred["protocol"].isin(protocols)].groupby(["protocol", "method"], sort=False):
        rows = g["row"].to_numpy()
        p = g["pred_ms"].to_numpy(dtype=float)
        ok = np.isfinite(p) & (p > 0)
        rows, p = rows[ok], p[ok]
        ratio = p / y[rows]
        for c in CLASSES:
            m = cls[rows] == c
            if not m.any():
                continue
            ape = 100 * np.abs(ratio[m] - 1)
            out.append({"protocol": proto, "method": method, "batch_scaling": c, "rows": int(m.sum()),
                        "share_pct": 100.0 * m.sum() / len(rows), "mape_pct": float(ape.mean()),
                        "median_ape_pct": float(np.median(ape)),
                        "geo_mean_pred_over_measured": float(np.exp(np.log(ratio[m]).mean()))})
    return pd.DataFrame(out)
