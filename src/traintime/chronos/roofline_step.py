"""Compute time of one training step from a roofline: the default step-time source of ``traintime predict``.

*Compute time* = forward + backward + optimizer step with a data pipeline that keeps up (no DataLoader
wait). It is the time a step takes when the GPU is the bottleneck, the quantity that transfers across
hosts. The model is deliberately simple and physically monotone:

``step_ms = launch_ms + max(flops / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency))``

* ``flops`` = ``flops_train_per_batch`` (3 x analytic forward FLOPs per sample x batch,
  :mod:`traintime.measure.analytic`; scales with batch and input size);
* ``peak`` = FP32 GFLOP/s of the spec database at 32-bit; at 16 / bf16 the half-precision peak where
  the spec database lists a higher one (:func:`traintime.core.gpudb.peak_gflops`);
* ``bytes`` = parameters read twice + gradients written + optimizer state read and written
  (``2 param_bytes + grad_bytes + 2 optimizer_state_bytes``) + activations written in the forward pass
  and read in the backward pass (``2 x act_bytes_per_sample x batch``; 2 bytes a scalar at 16-bit);
* ``launch_ms`` = ``kernels x launch_us / 1000`` with ``kernels`` = 3 x layers (forward, backward
  data, backward weight), a per-step floor independent of batch.

The three constants (``compute_efficiency``, ``memory_efficiency``, ``launch_us``) are **assumed
nominal values, not fitted** (0.40, 0.60, 5 us) unless :meth:`fit` calibrates them on measured compute
times (least squares in log space). The output names the source. Whatever the constants, the estimate
grows with batch (FLOPs and activation bytes are linear in it) and orders GPUs by peak and bandwidth.

Any object with ``predict(rows) -> ms`` and a ``label`` attribute can replace this one in
:class:`traintime.predict.TrainingTimePredictor` (``step_model=``): see :class:`StepTimeModel`.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.chronos.roofline_frozen import (  # noqa: E402
    STEP_ROW_COLUMNS,
    roofline_label,
    roofline_terms,
)
from traintime.core.errors import SchemaError


@runtime_checkable
class StepTimeModel(Protocol):
    """What ``predict`` needs of a step-time model: compute ms per step for each row of
    :data:`STEP_ROW_COLUMNS`, and a one-line ``label`` naming it in the output."""

    label: str

    def predict(self, rows: pd.DataFrame) -> np.ndarray: ...


class RooflineStepTime(RegressorMixin, BaseEstimator):
    """Roofline compute time of a training step (see module doc).

    Parameters
    ----------
    compute_efficiency : fraction of peak FLOP/s reached by the compute-bound part (assumed 0.40).
    memory_efficiency : fraction of peak bandwidth reached by the memory-bound part (assumed 0.60).
    launch_us : per-kernel launch floor in microseconds (assumed 5).
    """

    def __init__(self, compute_efficiency: float = 0.40, memory_efficiency: float = 0.60,
                 launch_us: float = 5.0) -> None:
        self.compute_efficiency = compute_efficiency
        self.memory_efficiency = memory_efficiency
        self.launch_us = launch_us

    @property
    def label(self) -> str:
        return roofline_label(self.compute_efficiency, self.memory_efficiency, self.launch_us,
                              getattr(self, "fitted_", False))

    @staticmethod
    def _check(rows: pd.DataFrame) -> None:
        missing = [c for c in STEP_ROW_COLUMNS if c not in rows.columns]
        if missing:
            raise SchemaError(f"step-time rows lack column(s) {', '.join(missing)}")

    def terms(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Compute-bound, memory-bound and launch terms (ms) at unit efficiency."""
        return roofline_terms(rows, self.launch_us)

    def fit(self, rows: pd.DataFrame, y_ms: Any) -> RooflineStepTime:
        """Calibrate the three constants on measured compute times: minimise the mean squared log error
        over log(compute_efficiency), log(memory_efficiency), log(launch_us) (Nelder-Mead from the
        current values; efficiencies kept in (0, 1])."""
        from scipy.optimize import minimize

        t = self.terms(rows)
        y = np.asarray(y_ms, dtype=float)
        ok = (y > 0) & np.isfinite(t.to_numpy()).all(axis=1)
        comp, mem = t["compute_ms"].to_numpy()[ok], t["memory_ms"].to_numpy()[ok]
        launch1 = t["launch_ms"].to_numpy()[ok] / self.launch_us  # per microsecond of launch cost
        ly = np.log(y[ok])

        def loss(theta: np.ndarray) -> float:
            ce, me = np.exp(np.minimum(theta[:2], 0.0))
            pred = launch1 * np.exp(theta[2]) + np.maximum(comp / ce, mem / me)
            return float(np.mean((np.log(pred) - ly) ** 2))

        x0 = np.log([self.compute_efficiency, self.memory_efficiency, max(self.launch_us, 1e-3)])
        res = minimize(loss, x0, method="Nelder-Mead", options={"maxiter": 2000, "xatol": 1e-4, "fatol": 1e-8})
        ce, me = np.exp(np.minimum(res.x[:2], 0.0))
        self.compute_efficiency, self.memory_efficiency = float(ce), float(me)
        self.launch_us = float(np.exp(res.x[2]))
        self.fitted_ = True
        return self

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        t = self.terms(rows)
        return (t["launch_ms"] + np.maximum(t["compute_ms"] / self.compute_efficiency,
                                            t["memory_ms"] / self.memory_efficiency)).to_numpy()
