"""How a measured step time grows with batch (a diagnostic of where the out-of-fold step-time error sits).

A network timed on one GPU at several batches shows how much of its step is work: the exponent
``s = log(t(b_max) / t(b_min)) / log(b_max / b_min)`` of its measured times (medians per batch) is about 1 when the
step is all work that grows with the batch, and about 0 when the step takes the same time whatever the batch - a
fixed per-step cost of the host that ran it (Python dispatch, kernel launches, synchronisation), which no GPU spec
describes. :func:`batch_scaling_class` puts each row in one class of :data:`CLASSES` by the exponent of its own
network on its own GPU; :func:`traintime.predict_step_grouped.errors_by_batch_scaling` gives the out-of-fold error of
each step-time method per class.

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
