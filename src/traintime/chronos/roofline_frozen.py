"""The roofline step-time model with fixed constants, without scikit-learn or scipy: what ``traintime predict``
loads from the saved calibration (``<models-dir>/steptime/roofline_calibration.json``).

:class:`~traintime.chronos.roofline_step.RooflineStepTime` (the estimator that *fits* the constants) computes its
terms with :func:`roofline_terms` of this module, so both give the same numbers; see its module doc for the
model. Keeping prediction apart lets the ``--no-probe`` path answer without importing scikit-learn.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.memo import memoized_on_frame

#: columns a step-time model receives (one row per configuration x GPU)
STEP_ROW_COLUMNS: tuple[str, ...] = (
    "model", "family", "input_px", "batch_size", "precision", "gpu", "flops_train_per_batch", "param_bytes",
    "grad_bytes", "optimizer_state_bytes", "act_bytes_per_sample", "layers", "fp32_gflops", "fp16_gflops",
    "memory_bandwidth_gbps",
)


@memoized_on_frame
def roofline_terms(rows: pd.DataFrame, launch_us: float, precision: str | None = None) -> pd.DataFrame:
    """Compute-bound, memory-bound and launch terms (ms) at unit efficiency (see roofline_step's module doc), at each
    row's ``precision`` or, given ``precision``, at that one for every row."""
    from traintime.core.gpudb import peak_gflops

    missing = [c for c in STEP_ROW_COLUMNS if c not in rows.columns]
    if missing:
        raise SchemaError(f"step-time rows lack column(s) {', '.join(missing)}")
    b = rows["batch_size"].to_numpy(dtype=float)
    flops = rows["flops_train_per_batch"].to_numpy(dtype=float)
    if precision is not None:
        peak = peak_gflops(rows, str(precision))
    else:
        half = rows["precision"].astype(str).ne("32").to_numpy()
        peak = np.where(half, peak_gflops(rows, "16"), peak_gflops(rows, "32"))
    state = (2 * rows["param_bytes"] + rows["grad_bytes"] + 2 * rows["optimizer_state_bytes"]).to_numpy(float)
    act = 2.0 * rows["act_bytes_per_sample"].to_numpy(dtype=float) * b
    bw = rows["memory_bandwidth_gbps"].to_numpy(dtype=float)
    return pd.DataFrame({
        "compute_ms": flops / (peak * 1e9) * 1e3,
        "memory_ms": (state + act) / (bw * 1e9) * 1e3,
        "launch_ms": 3.0 * rows["layers"].to_numpy(dtype=float) * launch_us / 1e3,
    }, index=rows.index)


def roofline_label(compute_efficiency: float, memory_efficiency: float, launch_us: float, fitted: bool) -> str:
    how = "fitted" if fitted else "assumed"
    return (f"roofline compute time ({how} efficiencies: compute {compute_efficiency:.2f}, memory "
            f"{memory_efficiency:.2f}, launch {launch_us:g} us/kernel)")


class FrozenRoofline:
    """Roofline step time with given constants (prediction only; ``label`` names it in the output)."""

    #: short name of the step model (``--step-model``)
    name = "roofline"

    def __init__(self, compute_efficiency: float, memory_efficiency: float, launch_us: float,
                 fitted: bool = True) -> None:
        self.compute_efficiency = float(compute_efficiency)
        self.memory_efficiency = float(memory_efficiency)
        self.launch_us = float(launch_us)
        self.fitted_ = bool(fitted)

    @property
    def label(self) -> str:
        return roofline_label(self.compute_efficiency, self.memory_efficiency, self.launch_us, self.fitted_)

    def terms(self, rows: pd.DataFrame) -> pd.DataFrame:
        return roofline_terms(rows, self.launch_us)

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        t = self.terms(rows)
        return (t["launch_ms"] + np.maximum(t["compute_ms"] / self.compute_efficiency,
                                            t["memory_ms"] / self.memory_efficiency)).to_numpy()


def frozen_from_calibration(cal: dict[str, Any], family: str) -> FrozenRoofline | None:
    """The calibrated constants of ``family`` in a calibration JSON (None when the family is absent)."""
    fam = cal.get("families", {}).get(family)
    if not fam:
        return None
    return FrozenRoofline(fam["compute_efficiency"], fam["memory_efficiency"], fam["launch_us"])
