"""Error metrics and seed aggregation shared by every evaluation (CHRONOS and zero-shot).

All functions take array-likes of equal length; percentages are in percent (0-100).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def _arrays(y_true: Sequence[float], y_pred: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(y_true, dtype=float)
    p = np.asarray(y_pred, dtype=float)
    if t.shape != p.shape:
        raise ValueError(f"shape mismatch: {t.shape} vs {p.shape}")
    if t.size == 0:
        raise ValueError("no values")
    return t, p


def ape(y_true: Sequence[float], y_pred: Sequence[float]) -> np.ndarray:
    """Absolute percentage errors |p - t| / |t| * 100. Zero targets are an error."""
    t, p = _arrays(y_true, y_pred)
    if np.any(t == 0):
        raise ValueError("APE undefined for a zero target")
    return np.abs(p - t) / np.abs(t) * 100.0


def mape(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    return float(np.mean(ape(y_true, y_pred)))


def median_ape(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    return float(np.median(ape(y_true, y_pred)))


def rmse(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    t, p = _arrays(y_true, y_pred)
    return float(np.sqrt(np.mean((p - t) ** 2)))


def mae(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    t, p = _arrays(y_true, y_pred)
    return float(np.mean(np.abs(p - t)))


def spearman(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    t, p = _arrays(y_true, y_pred)
    if t.size < 2:
        return float("nan")
    from scipy import stats  # lazy: ~1 s of import per job otherwise

    return float(stats.spearmanr(t, p).statistic)


def pearson_log(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Pearson r of log latencies (the zero-shot paper's r)."""
    t, p = _arrays(y_true, y_pred)
    if t.size < 2:
        return float("nan")
    from scipy import stats

    return float(stats.pearsonr(np.log(t), np.log(p)).statistic)


def share_within(y_true: Sequence[float], y_pred: Sequence[float], threshold_pct: float) -> float:
    """Share (0-1) of predictions whose APE is at or below ``threshold_pct``."""
    return float(np.mean(ape(y_true, y_pred) <= threshold_pct))


def abs_log_ratio(t_pred: Sequence[float], t_true: Sequence[float]) -> np.ndarray:
    """|log(t_pred / t_true)|, the zero-shot paper's landscape error."""
    t, p = _arrays(t_true, t_pred)
    return np.abs(np.log(p / t))


def step_errors(y_true: Sequence[float], y_pred: Sequence[float]) -> dict[str, float]:
    """MAPE, median APE and geometric mean of predicted / true (every step-time table of ``predict`` reports these
    three, under these keys); NaN for no values (a method without a finite prediction on a slice)."""
    if np.asarray(y_true).size == 0 and np.asarray(y_pred).size == 0:
        return dict.fromkeys(("mape_pct", "median_ape_pct", "geo_mean_pred_over_measured"), float("nan"))
    t, p = _arrays(y_true, y_pred)
    e = ape(t, p)
    return {"mape_pct": float(e.mean()), "median_ape_pct": float(np.median(e)),
            "geo_mean_pred_over_measured": float(np.exp(np.mean(np.log(p / t))))}


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; sd is NaN for a single value: no spread was measured)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan")


def mean_sd_ci95(values: Sequence[float]) -> tuple[float, float, float, float]:
    """Mean, sd (ddof=1) and the two-sided 95 % Student-t interval of the mean over seeds:
    (mean, sd, low, high) with mean +- t(0.975, n-1) sd / sqrt(n) (:func:`traintime.core.verdict.t_interval`,
    the interval the claims' verdicts use). One value: sd and the interval are NaN (no spread measured)."""
    from traintime.core.verdict import t_interval

    m, sd = mean_sd(values)
    if np.isnan(sd):
        return m, sd, float("nan"), float("nan")
    n = int(np.sum(~np.isnan(np.asarray(values, dtype=float))))
    lo, hi, _ = t_interval(m, sd, n)
    return m, sd, float(lo), float(hi)


def aggregate_seeds(df: pd.DataFrame, by: list[str], value_cols: list[str], seed_col: str = "seed") -> pd.DataFrame:
    """Collapse per-seed rows into ``<col>_mean``, ``<col>_sd`` and ``n_seeds`` per group."""
    rows = []
    for keys, g in df.groupby(by, sort=True, dropna=False):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip(by, keys))
        for c in value_cols:
            row[f"{c}_mean"], row[f"{c}_sd"] = mean_sd(g[c])
        row["n_seeds"] = int(g[seed_col].nunique()) if seed_col in g else len(g)
        rows.append(row)
    return pd.DataFrame(rows)


def fmt_mean_sd(mean: float, sd: float, digits: int = 2) -> str:
    """'12.34 +- 0.56' (or '12.34' for a single seed)."""
    if np.isnan(mean):
        return "n/a"
    if np.isnan(sd):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} +- {sd:.{digits}f}"
