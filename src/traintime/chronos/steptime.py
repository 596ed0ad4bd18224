"""Operator-level roofline step-time model with a learned, hardware-smooth efficiency.

Model
    A step is a sum of terms c (operator classes of :mod:`traintime.measure.opgraph`, plus a
    launch term). Each term has a roofline time r_c = max(FLOPs_c / peak_c, bytes_c / bandwidth)
    (computed by :func:`roofline_terms`), and the model predicts

        t = sum_c r_c * exp(w_c . [1, z])

    where z are standardised efficiency features (GPU spec logs, precision, operator size per op,
    a smooth inverse-waves proxy). exp(-w_c . [1, z]) is the learned efficiency of class c; it is
    log-linear, hence smooth, in the hardware axes (no tree splits on GPU specs; see
    ``shared/notes/cross-gpu.md``). The weights minimise the squared log error plus ``alpha`` times
    the squared non-intercept weights (ridge), by Gauss-Newton / trust-region least squares
    (``scipy.optimize.least_squares``, analytic Jacobian). Deterministic: no seed.

Host mode (``host_mode=True``)
    With a measurement t_host of the same workload on a host GPU, the prediction is
    t_host * M(target) / M(host): the model learns only the ratio, and the host's own error cancels.

Estimator input (numeric, so the estimator is scikit-learn compatible)
    ``X[:, :n_terms]`` = log roofline times (seconds) of the terms, ``X[:, n_terms:]`` = z.
    In host mode the row is [target block, host block, log t_host] with blocks of equal width.
    ``y``: step time (ms, > 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_array, check_is_fitted, check_X_y

from traintime.core.errors import SchemaError

#: Tensor-core dense FLOP per clock per tensor core for fp16 with fp32 accumulation, by architecture
#: (NVIDIA architecture whitepapers; GeForce cards run fp32-accumulate at half rate, see
#: :func:`tensor_peak_gflops`). Pascal has no tensor cores: its fp16 peak is the spec's fp16_gflops.
TC_FLOP_PER_CLK: dict[str, float] = {"Volta": 128.0, "Turing": 128.0, "Ampere": 256.0, "Ada Lovelace": 256.0,
                                     "Hopper": 1024.0, "Blackwell": 256.0}
#: Ampere data-centre part (GA100) has 4x the per-core tensor rate of GA10x.
GA100_GPUS = frozenset({"A100-PCIe-80GB"})


def tensor_peak_gflops(spec: dict | object) -> float:
    """Dense fp16 tensor peak with fp32 accumulation (what autocast matmuls use), GFLOP/s.

    tensor cores x boost clock x FLOP/clock/core (:data:`TC_FLOP_PER_CLK`, x2 for GA100),
    halved on GeForce (RTX) cards; Pascal: max(fp16, fp32) spec peak. Never below the fp32 peak.
    """
    g = lambda k: spec[k]  # noqa: E731  (works for Series and dicts)
    arch, gpu = str(g("architecture")), str(g("gpu"))
    fp32 = float(g("fp32_gflops"))
    if arch not in TC_FLOP_PER_CLK or float(g("tensor_cores")) <= 0:
        return max(fp32, float(g("fp16_gflops")) if arch == "Pascal" and gpu.startswith("P100") else fp32)
    per = TC_FLOP_PER_CLK[arch] * (2.0 if gpu in GA100_GPUS else 1.0)
    peak = float(g("tensor_cores")) * float(g("boost_clock_mhz")) * per / 1000.0
    if gpu.startswith("RTX-"):
        peak *= 0.5
    return max(fp32, peak)


class OperatorRooflineRegressor(BaseEstimator, RegressorMixin):
    """Sum of per-term roofline times x learned log-linear efficiencies (module doc).

    Parameters: ``n_terms`` (leading columns that are log roofline times), ``alpha`` (ridge on
    the non-intercept efficiency weights, per row-normalised loss), ``host_mode``, ``max_nfev``,
    ``clip_z``: clip each efficiency feature to its training range at prediction (no extrapolation
    of the efficiency beyond the hull of each axis; the roofline itself still extrapolates).
    """

    def __init__(self, n_terms: int = 1, alpha: float = 1e-3, host_mode: bool = False, max_nfev: int = 50,
                 clip_z: bool = False) -> None:
        self.n_terms = n_terms
        self.clip_z = clip_z
        self.alpha = alpha
        self.host_mode = host_mode
        self.max_nfev = max_nfev

    # ---------------------------------------------------------------- helpers
    def _split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        if not self.host_mode:
            return X, None, None
        if (X.shape[1] - 1) % 2:
            raise ValueError("host mode needs [target block, host block, log t_host] columns (odd width)")
        w = (X.shape[1] - 1) // 2
        return X[:, :w], X[:, w:2 * w], X[:, -1]

    def _design(self, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        k = int(self.n_terms)
        logr = B[:, :k]
        z = (B[:, k:] - self.z_mean_) / self.z_scale_
        if self.clip_z and hasattr(self, "z_lo_"):
            z = np.clip(z, self.z_lo_, self.z_hi_)
        return logr, np.hstack([np.ones((len(B), 1)), z])

    def _log_model(self, W: np.ndarray, logr: np.ndarray, Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log M and the share of each term (for the Jacobian)."""
        a = logr + Z @ W.T  # (n, k)
        m = a.max(axis=1, keepdims=True)
        e = np.exp(a - m)
        s = e.sum(axis=1, keepdims=True)
        return (m + np.log(s)).ravel(), e / s

    def _more_tags(self) -> dict:
        return {"requires_positive_y": True}

    def __sklearn_tags__(self):  # scikit-learn >= 1.6
        tags = super().__sklearn_tags__()
        tags.target_tags.positive_only = True
        return tags

    # ---------------------------------------------------------------- API
    def fit(self, X: np.ndarray, y: Sequence[float]) -> "OperatorRooflineRegressor":
        from scipy.optimize import least_squares

        X, y = check_X_y(X, y, dtype=float, y_numeric=True)
        y = np.asarray(y, dtype=float)
        if np.any(y <= 0):
            raise ValueError("step times must be positive (the model fits log time)")
        k = int(self.n_terms)
        T, H, logh = self._split(X)
        if T.shape[1] < k:
            raise ValueError(f"X has {T.shape[1]} columns per block, fewer than n_terms={k}")
        self.n_features_in_ = X.shape[1]
        ref = T if H is None else np.vstack([T, H])
        zc = ref[:, k:]
        self.z_mean_ = zc.mean(axis=0) if zc.shape[1] else np.zeros(0)
        sd = zc.std(axis=0) if zc.shape[1] else np.zeros(0)
        self.z_scale_ = np.where(sd > 1e-12, sd, 1.0)
        zs = (zc - self.z_mean_) / self.z_scale_
        self.z_lo_ = zs.min(axis=0) if zs.shape[1] else np.zeros(0)
        self.z_hi_ = zs.max(axis=0) if zs.shape[1] else np.zeros(0)
        lt, Zt = self._design(T)
        if H is not None:
            lh, Zh = self._design(H)
            target = np.log(y) - logh
        else:
            target = np.log(y)
        d = Zt.shape[1]
        n = len(y)
        ridge = np.sqrt(float(self.alpha) * n) if self.alpha > 0 else 0.0
        mask = np.ones((k, d))
        mask[:, 0] = 0.0

        def resid(theta: np.ndarray) -> np.ndarray:
            W = theta.reshape(k, d)
            lm, _ = self._log_model(W, lt, Zt)
            if H is not None:
                lm = lm - self._log_model(W, lh, Zh)[0]
            return np.concatenate([(lm - target) / np.sqrt(n), ridge / np.sqrt(n) * (W * mask).ravel()])

        def jac(theta: np.ndarray) -> np.ndarray:
            W = theta.reshape(k, d)
            _, st = self._log_model(W, lt, Zt)
            J = (st[:, :, None] * Zt[:, None, :]).reshape(n, k * d)
            if H is not None:
                _, sh = self._log_model(W, lh, Zh)
                J = J - (sh[:, :, None] * Zh[:, None, :]).reshape(n, k * d)
            return np.vstack([J / np.sqrt(n), np.diag(ridge / np.sqrt(n) * mask.ravel())])

        theta0 = np.zeros((k, d))
        if H is None:
            theta0[:, 0] = np.median(target - np.log(np.exp(lt).sum(axis=1)))
        from threadpoolctl import threadpool_limits

        # one BLAS thread: the Jacobian is small, and threads oversubscribed on a busy machine make
        # each trust-region step orders of magnitude slower
        with threadpool_limits(limits=1):
            sol = least_squares(resid, theta0.ravel(), jac=jac, method="trf", max_nfev=int(self.max_nfev),
                                x_scale="jac")
        self.coef_ = sol.x.reshape(k, d)
        self.converged_ = bool(sol.success)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X = check_array(X, dtype=float)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted with {self.n_features_in_}")
        T, H, logh = self._split(X)
        lt, Zt = self._design(T)
        lm = self._log_model(self.coef_, lt, Zt)[0]
        if H is not None:
            lh, Zh = self._design(H)
            lm = lm - self._log_model(self.coef_, lh, Zh)[0] + logh
        return np.exp(lm)

    def efficiency(self, X: np.ndarray) -> np.ndarray:
        """Learned efficiency exp(-w_c . [1, z]) of each term for each row (target block), (n, n_terms)."""
        check_is_fitted(self, "coef_")
        T, _, _ = self._split(check_array(X, dtype=float))
        _, Z = self._design(T)
        return np.exp(-(Z @ self.coef_.T))


def check_positive(name: str, values: np.ndarray) -> None:
    """Raise :class:`SchemaError` naming ``name`` when any value is not a positive finite number."""
    v = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(v) & (v > 0)):
        raise SchemaError(f"{name}: every value must be a positive finite number")
