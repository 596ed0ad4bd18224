"""Roofline step time with a *smooth learned efficiency*: the prediction side (numpy only, no scikit-learn or scipy).

The model (fitted by :class:`traintime.chronos.efficiency_step.EfficiencyStepTime`, frozen as JSON at
``<models-dir>/steptime/efficiency_model.json`` and read here) is

``step_ms = launch_us x 3 layers / 1000 + max(compute_ms, memory_ms) / eff``,
``eff = sigmoid(w . z)``

with ``compute_ms`` / ``memory_ms`` the roofline terms at unit efficiency
(:func:`traintime.chronos.roofline_frozen.roofline_terms`) and ``z`` the standardised features of
:data:`FEATURES` (one row per configuration x GPU):

* ``log_flops``: log10 of training FLOPs per step (the work size: grows with batch and input size);
* ``log_flops_per_layer``: log10 of FLOPs per step over the layer count (work per kernel: small kernels
  leave the GPU idle); ``log_batch``: log10 of the batch size;
* ``log_intensity_over_ridge``: log10 of (FLOPs / byte moved per step: state + activations, as in the
  roofline) over the GPU's ridge point (peak / bandwidth); with the other logs it fixes log(bytes), which
  is therefore not a feature of its own (it would be exactly collinear);
* ``half``: 1 at 16-bit / bf16, else 0; ``half_x_log_flops``: their product (tensor units need more work to fill);
* ``log_peak``, ``log_bandwidth``: log10 of the GPU's peak GFLOP/s at that precision and of its GB/s;
* ``transformer``: 1 for the Transformer family, else 0.

The efficiency is bounded in (0, 1) and smooth (monotone in each coefficient's direction) in the work size
and the hardware axes, so an unseen GPU or a larger input moves the prediction continuously instead of
jumping a tier, and extrapolation in work size saturates at the fitted ceiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traintime.chronos.roofline_frozen import roofline_terms

#: efficiency features, in coefficient order after the intercept (the ``kernel`` set)
FEATURES: tuple[str, ...] = ("log_flops", "log_flops_per_layer", "log_batch", "log_intensity_over_ridge", "half",
                             "half_x_log_flops", "log_peak", "log_bandwidth", "transformer")
#: named feature sets an estimator may use (``features=``); ``base`` lacks the per-kernel work and batch terms
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "kernel": FEATURES,
    "base": tuple(f for f in FEATURES if f not in ("log_flops_per_layer", "log_batch")),
}


def efficiency_features(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(raw features of :data:`FEATURES`, roofline terms at unit efficiency and 1 us launch) of step rows."""
    t = roofline_terms(rows, 1.0)
    flops = rows["flops_train_per_batch"].to_numpy(dtype=float)
    comp, mem = t["compute_ms"].to_numpy(), t["memory_ms"].to_numpy()
    peak = flops / np.maximum(comp, 1e-30) / 1e6  # GFLOP/s used by the roofline (ms -> s, FLOP -> GFLOP)
    bw = rows["memory_bandwidth_gbps"].to_numpy(dtype=float)
    nbytes = mem * bw * 1e6
    half = rows["precision"].astype(str).ne("32").to_numpy().astype(float)
    lf = np.log10(np.maximum(flops, 1.0))
    x = pd.DataFrame({
        "log_flops": lf,
        "log_flops_per_layer": lf - np.log10(np.maximum(rows["layers"].to_numpy(dtype=float), 1.0)),
        "log_batch": np.log10(np.maximum(rows["batch_size"].to_numpy(dtype=float), 1.0)),
        "log_intensity_over_ridge": np.log10(np.maximum(flops, 1.0) / np.maximum(nbytes, 1.0))
        - np.log10(np.maximum(peak, 1e-9) / np.maximum(bw, 1e-9)),
        "half": half,
        "half_x_log_flops": half * lf,
        "log_peak": np.log10(np.maximum(peak, 1e-9)),
        "log_bandwidth": np.log10(np.maximum(bw, 1e-9)),
        "transformer": rows["family"].astype(str).eq("Transformer").to_numpy().astype(float),
    }, index=rows.index)
    return x, t


def efficiency_predict(rows: pd.DataFrame, coef: np.ndarray, mean: np.ndarray, scale: np.ndarray,
                       launch_us: float, features: tuple[str, ...] = FEATURES) -> tuple[np.ndarray, np.ndarray]:
    """(step ms, efficiency) of ``rows`` for coefficients ``coef`` (intercept first) on features
    standardised with ``mean`` / ``scale`` (columns ``features``)."""
    x, t = efficiency_features(rows)
    z = (x[list(features)].to_numpy(dtype=float) - mean) / scale
    eff = 1.0 / (1.0 + np.exp(-(coef[0] + z @ coef[1:])))
    bound = np.maximum(t["compute_ms"].to_numpy(), t["memory_ms"].to_numpy())
    return t["launch_ms"].to_numpy() * launch_us + bound / eff, eff


class FrozenEfficiency:
    """The efficiency step model with given coefficients (prediction only; ``label`` names it in the output)."""

    #: short name of the step model (``--step-model``)
    name = "efficiency"

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params
        self.coef = np.asarray(params["coef"], dtype=float)
        self.mean = np.asarray(params["mean"], dtype=float)
        self.scale = np.asarray(params["scale"], dtype=float)
        self.launch_us = float(params["launch_us"])
        self.features = tuple(params.get("features", FEATURES))

    @property
    def label(self) -> str:
        src = self.params.get("trained_on", "fitted")
        return f"roofline x learned efficiency (sigmoid of work size, intensity, precision, GPU peak / bandwidth; {src})"

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        return efficiency_predict(rows, self.coef, self.mean, self.scale, self.launch_us, self.features)[0]


def load_frozen_efficiency(path: Any) -> FrozenEfficiency | None:
    """The frozen model of ``path`` (JSON written by the rule), or None when the file does not exist."""
    import json
    from pathlib import Path

    p = Path(path)
    return FrozenEfficiency(json.loads(p.read_text())) if p.exists() else None
