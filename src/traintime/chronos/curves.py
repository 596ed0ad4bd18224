"""Learning-curve extrapolation: predict the early-stopping epoch from the first k validation losses.

A parametric family is fitted per run to the first ``k`` epochs of its validation loss, the curve
is extrapolated to ``max_epochs`` and the early-stopping rule of the run (``patience``,
``min_delta``; :class:`traintime.measure.train.EarlyStopping`) is replayed on the observed epochs
followed by the extrapolated ones. The epoch at which the rule fires is the prediction.

Families (``t`` = epoch, 1-based; :data:`FAMILIES`):

``exp``    ``L(t) = a + b exp(-c (t - 1))``
``power``  ``L(t) = a + b t^(-c)``

Three parameters cannot be identified from one or two points, so the fit is penalised least
squares: residuals of the observed losses (relative to the first loss) plus ``prior_weight`` times
the deviation of ``(a / L1, log c)`` from a prior. The prior is the median of those quantities over
complete curves of *other* runs (:func:`curve_prior`, fitted on the training runs only), or a weak
generic one (:data:`GENERIC_PRIOR`) when none is given. With ``k >= 4`` the data dominate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from traintime.core.errors import SchemaError, unknown_name

FAMILIES: tuple[str, ...] = ("exp", "power")

#: Generic prior (a / L1, log c) per family when no training curves are given: the loss falls to
#: half its first value at a moderate rate.
GENERIC_PRIOR: dict[str, tuple[float, float]] = {"exp": (0.5, math.log(0.3)), "power": (0.5, math.log(1.0))}


@dataclass(frozen=True)
class CurveFit:
    """Fitted parameters of one family (``a`` asymptote, ``b`` scale, ``c`` rate) and the residual RMS
    of the observed (relative) losses."""

    family: str
    a: float
    b: float
    c: float
    rms: float

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        if self.family == "exp":
            return self.a + self.b * np.exp(-self.c * (t - 1.0))
        return self.a + self.b * np.power(t, -self.c)


def _check_curve(losses: Sequence[float]) -> np.ndarray:
    y = np.asarray(list(losses), dtype=float)
    if y.ndim != 1 or y.size < 1:
        raise SchemaError("validation curve: need at least one loss value")
    if not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise SchemaError(f"validation curve: losses must be positive finite numbers, got {list(y)}")
    return y


def fit_curve(losses: Sequence[float], family: str = "exp", prior: tuple[float, float] | None = None,
              prior_weight: float = 0.02) -> CurveFit:
    """Fit ``family`` to the validation losses of epochs 1..k (penalised least squares, see module)."""
    from scipy.optimize import least_squares

    if family not in FAMILIES:
        raise unknown_name("curve family", family, FAMILIES)
    y = _check_curve(losses)
    y1 = float(y[0])
    r = y / y1
    t = np.arange(1, len(y) + 1, dtype=float)
    pa, plc = prior if prior is not None else GENERIC_PRIOR[family]

    def model(p: np.ndarray) -> np.ndarray:
        a, b, lc = p
        return a + b * (np.exp(-np.exp(lc) * (t - 1.0)) if family == "exp" else np.power(t, -np.exp(lc)))

    def resid(p: np.ndarray) -> np.ndarray:
        return np.concatenate([model(p) - r, prior_weight * np.array([p[0] - pa, 0.5 * (p[2] - plc)])])

    b0 = max(1.0 - pa, 1e-3)
    x0 = np.array([pa, b0, plc])
    sol = least_squares(resid, x0, bounds=([0.0, 0.0, math.log(1e-3)], [2.0, 5.0, math.log(10.0)]))
    a, b, lc = sol.x
    rms = float(np.sqrt(np.mean((model(sol.x) - r) ** 2)))
    return CurveFit(family, a * y1, b * y1, float(np.exp(lc)), rms)


def replay_stop(curve: Iterable[float], patience: int, min_delta: float, max_epochs: int) -> int:
    """Epoch at which the early-stopping rule fires on ``curve`` (``max_epochs`` if it never does)."""
    from traintime.measure.train import EarlyStopping

    es = EarlyStopping(min_delta=min_delta, patience=patience, max_epochs=max_epochs)
    for v in curve:
        if es.update(v):
            return es.epoch
    return max_epochs if es.epoch >= max_epochs else es.epoch + 0  # curve shorter than the cap


def predict_stop_epoch(losses: Sequence[float], patience: int, min_delta: float, max_epochs: int,
                       family: str = "exp", prior: tuple[float, float] | None = None,
                       prior_weight: float = 0.02) -> int:
    """Predicted early-stopping epoch from the first k validation losses (see module docstring).

    If the rule already fires within the observed epochs, that epoch is returned.
    """
    y = _check_curve(losses)
    if patience < 1 or max_epochs < 1 or min_delta < 0:
        raise SchemaError("early stopping: need patience >= 1, max_epochs >= 1, min_delta >= 0")
    fit = fit_curve(y, family, prior, prior_weight)
    k = len(y)
    future = fit(np.arange(k + 1, max(max_epochs, k) + 1))
    full = np.concatenate([y, future])[:max(max_epochs, k)]
    return replay_stop(full, patience, min_delta, max_epochs)


def curve_prior(curves: Iterable[Sequence[float]], family: str = "exp") -> tuple[float, float]:
    """Median ``(a / L1, log c)`` of ``family`` fitted to complete curves (nearly unpenalised)."""
    pars = []
    for c in curves:
        y = _check_curve(c)
        if len(y) < 3:
            continue
        f = fit_curve(y, family, prior_weight=1e-3)
        pars.append((f.a / y[0], math.log(f.c)))
    if not pars:
        return GENERIC_PRIOR[family]
    arr = np.asarray(pars)
    return float(np.median(arr[:, 0])), float(np.median(arr[:, 1]))
