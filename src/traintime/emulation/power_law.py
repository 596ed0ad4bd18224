"""Per-workload power law of the latency ratio to a host GPU: a with-host baseline smooth in the hardware axes.

For one workload (model, input size, batch, precision) measured on a host GPU and on training target GPUs,

``log(t_target / t_host) = c + a log(F_host / F) + b log(BW_host / BW) + s log(SM_host / SM)``

with ``F`` the FP32 peak (GFLOP/s), ``BW`` the memory bandwidth (GB/s) and ``SM`` the SM count of the spec table.
:class:`PowerLawRatio` fits one global set of coefficients by least squares over every training row, and one set
per workload shrunk toward the global one (ridge toward it with strength ``shrink``, in rows); a workload seen on
fewer than ``min_gpus`` training GPUs uses the global set. Unlike trees on spec values, the prediction moves
continuously with a new card's specs. Deterministic (no seed). :func:`power_law_logo` evaluates it leaving one
target GPU out, as :func:`traintime.emulation.baselines.leave_one_gpu_out` does for the learned baseline.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from traintime.core.errors import SchemaError
from traintime.emulation.schema import WORKLOAD_KEY

#: ratio features (host over target), in coefficient order after the intercept
RATIO_FEATURES: tuple[str, ...] = ("log_flops_ratio", "log_bandwidth_ratio", "log_sm_ratio")


def ratio_features(rows: pd.DataFrame, specs: pd.DataFrame, host_gpu: str) -> pd.DataFrame:
    """:data:`RATIO_FEATURES` of target rows (column ``gpu``) relative to ``host_gpu``, plus ``workload`` (a key)
    and ``log_host_ms`` (needs column ``host_ms``)."""
    spec = specs.drop_duplicates("gpu").set_index("gpu")
    missing = sorted(set(rows["gpu"]) - set(spec.index)) + ([host_gpu] if host_gpu not in spec.index else [])
    if missing:
        raise SchemaError(f"power-law baseline: no specs for GPU(s) {', '.join(missing)}")
    h = spec.loc[host_gpu]
    out = pd.DataFrame(index=rows.index)
    for name, col in zip(RATIO_FEATURES, ("fp32_gflops", "memory_bandwidth_gbps", "sms")):
        out[name] = np.log(float(h[col]) / rows["gpu"].map(spec[col]).astype(float))
    out["workload"] = rows[list(WORKLOAD_KEY)].astype(str).agg("|".join, axis=1)
    out["log_host_ms"] = np.log(rows["host_ms"].astype(float))
    return out


class PowerLawRatio(RegressorMixin, BaseEstimator):
    """Per-workload power law in the FLOPs, bandwidth and SM ratios to the host, shrunk toward a global fit.

    ``fit(X, y)``: X from :func:`ratio_features`, y the target latency (ms). ``predict(X)``: latency (ms).

    Parameters
    ----------
    shrink : ridge strength pulling a workload's coefficients toward the global ones (in rows; default 2).
    min_gpus : training GPUs a workload needs for its own coefficients (default 5; fewer: the global fit).
    """

    def __init__(self, shrink: float = 2.0, min_gpus: int = 5) -> None:
        self.shrink = shrink
        self.min_gpus = min_gpus

    @staticmethod
    def _design(X: pd.DataFrame) -> np.ndarray:
        return np.column_stack([np.ones(len(X)), X[list(RATIO_FEATURES)].to_numpy(dtype=float)])

    def fit(self, X: pd.DataFrame, y: object) -> PowerLawRatio:
        r = np.log(np.asarray(y, dtype=float)) - X["log_host_ms"].to_numpy(dtype=float)
        d = self._design(X)
        ok = np.isfinite(r) & np.isfinite(d).all(axis=1)
        if ok.sum() < d.shape[1]:
            raise SchemaError(f"power-law baseline: {int(ok.sum())} usable rows, need >= {d.shape[1]}")
        d, r, wl = d[ok], r[ok], X["workload"].to_numpy()[ok]
        self.global_ = np.linalg.lstsq(d, r, rcond=None)[0]
        lam = float(self.shrink) * np.eye(d.shape[1])
        self.per_workload_: dict[str, np.ndarray] = {}
        for w in np.unique(wl):
            m = wl == w
            if m.sum() >= int(self.min_gpus):
                dw = d[m]
                self.per_workload_[w] = np.linalg.solve(dw.T @ dw + lam, dw.T @ r[m] + lam @ self.global_)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if not hasattr(self, "global_"):
            raise SchemaError("PowerLawRatio is not fitted: call fit() first")
        d = self._design(X)
        coef = np.vstack([self.per_workload_.get(w, self.global_) for w in X["workload"]])
        return np.exp(X["log_host_ms"].to_numpy(dtype=float) + (d * coef).sum(axis=1))


def power_law_logo(targets: pd.DataFrame, host: pd.DataFrame, host_gpu: str, specs: pd.DataFrame,
                   group: str = "gpu", **params: float) -> pd.DataFrame:
    """Out-of-fold predictions of :class:`PowerLawRatio`: every value of ``group`` (``gpu``: leave one target GPU
    out; ``generation``: leave one RTX generation out) held out in turn, the host never. Returns the target rows with
    ``host_gpu``, ``host_ms``, ``pred_ms``, ``fold`` and ``seed`` (-1: deterministic); ``attrs['fit_s']``: wall
    seconds of each fold's fit."""
    from traintime.emulation.baselines import _host_latency

    data = targets[targets["gpu"] != host_gpu].merge(_host_latency(host, host_gpu), on=list(WORKLOAD_KEY))
    data = data.sort_values(["gpu", *WORKLOAD_KEY]).reset_index(drop=True)
    if data["gpu"].nunique() < 2:
        raise SchemaError("the power-law baseline needs at least two target GPUs")
    X = ratio_features(data, specs, host_gpu)
    if group == "generation":
        from traintime.core.specs import rtx_generation

        key = data["gpu"].map(rtx_generation)
    else:
        key = data[group].astype(str)
    out, fit_s = [], []
    for value in sorted(key.unique()):
        test = (key == value).to_numpy()
        t0 = time.perf_counter()
        est = PowerLawRatio(**params).fit(X[~test], data.loc[~test, "latency_ms"])
        fit_s.append(time.perf_counter() - t0)
        part = data[test].copy()
        part["pred_ms"] = est.predict(X[test])
        part["fold"] = value
        part["seed"] = -1
        part["host_gpu"] = host_gpu
        out.append(part)
    res = pd.concat(out, ignore_index=True)
    res.attrs["fit_s"] = fit_s
    return res


#: issue 13's targets for the with-host protocols of the consumer-GPU traces (MAPE %)
HOST_TARGETS_PCT = {"LOGO, main slice": 10.0, "LOGO, all settings pooled": 12.0,
                    "leave one generation out, all settings": 15.0}


def host_protocols(traces: pd.DataFrame, host_gpu: str, specs: pd.DataFrame, precision: str = "fp32",
                   batch_size: int = 16, learned: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per with-host protocol of the traces (:data:`HOST_TARGETS_PCT`; ``traces``: metric rows of every setting,
    ``precision`` / ``batch_size``: the main slice) and method: rows, folds, MAPE, median APE, the target. Methods:
    ``power_law`` (:class:`PowerLawRatio`, out of fold), ``flops`` (host x FP32 peak ratio, nothing fitted) and,
    on the main slice, ``learned`` (the XGBoost baseline's leave-one-GPU-out predictions ``learned``, mean over
    its seeds). ``fit_s_mean``: mean wall seconds of one fold's fit (power law only; NaN: nothing fitted here)."""
    from traintime.emulation.baselines import flops_predictions

    main = traces[(traces["precision"] == precision) & (traces["batch_size"] == batch_size)]
    flops = flops_predictions(traces, traces, host_gpu, specs)
    rows = []

    def add(protocol: str, method: str, pred: pd.DataFrame, folds: int, fit_s: list[float] | None = None) -> None:
        ape = 100 * (pred["pred_ms"] / pred["latency_ms"] - 1).abs()
        rows.append({"protocol": protocol, "method": method, "host_gpu": host_gpu, "rows": len(pred),
                     "gpus": pred["gpu"].nunique(), "folds": folds, "mape_pct": float(ape.mean()),
                     "median_ape_pct": float(ape.median()), "target_pct": HOST_TARGETS_PCT[protocol],
                     "meets_target": bool(ape.mean() <= HOST_TARGETS_PCT[protocol]),
                     "fit_s_mean": float(np.mean(fit_s)) if fit_s else np.nan})

    for protocol, data, group in [("LOGO, main slice", main, "gpu"), ("LOGO, all settings pooled", traces, "gpu"),
                                  ("leave one generation out, all settings", traces, "generation")]:
        law = power_law_logo(data, data, host_gpu, specs, group=group)
        add(protocol, "power_law", law, law["fold"].nunique(), law.attrs["fit_s"])
        fl = flops.merge(data[[*WORKLOAD_KEY, "gpu"]], on=[*WORKLOAD_KEY, "gpu"])
        add(protocol, "flops", fl, 0)
        if protocol == "LOGO, main slice" and learned is not None and len(learned):
            lm = learned.groupby([*WORKLOAD_KEY, "gpu"], as_index=False).agg(
                pred_ms=("pred_ms", "mean"), latency_ms=("latency_ms", "first"))
            add(protocol, "learned", lm, lm["gpu"].nunique())
    return pd.DataFrame(rows)
