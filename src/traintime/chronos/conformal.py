"""Split-conformal prediction intervals on grouped (leave-one-group-out) residuals.

A multiplicative interval ``[pred x exp(-q), pred x exp(q)]`` where ``q`` is the conformal quantile of the
absolute log-ratios ``|log(measured / predicted)|`` of calibration predictions. For the guarantee to carry
over to a new GPU (or model), the calibration predictions must come from models that did not see that
group: pass out-of-fold predictions of a leave-one-GPU-out (LOGO) split and their group labels.

With ``groups`` given, every group gets equal weight (each residual weighs ``1 / size of its group``), so a
GPU with many rows does not dominate the quantile; the weighted quantile uses the finite-sample correction
``ceil((n_groups + 1)(1 - alpha)) / n_groups`` on the group count. Without groups it is the textbook split
conformal quantile ``ceil((n + 1)(1 - alpha))``-th smallest residual.

:func:`min_calibration_groups` is the fewest calibration groups that can reach a nominal coverage at all (9 at
90 %). Intervals calibrated per stratum (a family) take the pooled residuals of every stratum where a stratum has
fewer (``strata`` of :func:`grouped_coverage`, :func:`stratum_pool`): with 2-3 held-out models per family, as in
the released convergence data, a per-family quantile is one of two or three residual groups and under-covers.
Pooled, coverage is nominal over all rows but uneven per family (leave one model out: CNN 99 %, MLP 94 %,
Transformer 67 %). *Normalised* pooling (each family's residuals divided by its scale, the mean over its other models
of their median absolute log residual; the pooled quantile of the ratios times the held-out family's scale) was tried
on the released out-of-fold epochs with its adoption rule declared first (LOMO and LODO coverage within 85-95 % and a
smaller spread between families than pooling's) and rejected: LOMO 84.0 % (CNN 85, MLP 75, Transformer 96), LODO
84.6 % (80 / 85 / 94; pooling: 91 / 92 / 88) - three models per family do not estimate a family's scale either.

:func:`combine_log_halfwidths` adds independent log-scale half-widths in quadrature (the interval of
hours = step x epochs; the seed spread only floors the epochs half-width,
:func:`~traintime.chronos.interval_math.seed_floored_halfwidth`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from traintime.core.errors import TraintimeError


class SplitConformal:
    """Multiplicative split-conformal interval.

    Parameters
    ----------
    coverage : nominal coverage (0-1), e.g. 0.9.
    finite_sample : apply the finite-sample correction (the guarantee; with few groups it takes the
        largest residual: 9 calibration GPUs at 90 % -> level 10 x 0.9 / 9 = 1). ``False``: the plain
        empirical quantile at ``coverage`` (no guarantee, narrower).

    ``get_params`` / ``set_params`` follow scikit-learn's estimator protocol (``sklearn.base.clone`` works)
    without importing scikit-learn: ``traintime predict`` calibrates its intervals with this class on every call.
    """

    def __init__(self, coverage: float = 0.9, finite_sample: bool = True) -> None:
        self.coverage = coverage
        self.finite_sample = finite_sample

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        return {"coverage": self.coverage, "finite_sample": self.finite_sample}

    def set_params(self, **params: Any) -> SplitConformal:
        for k, v in params.items():
            if k not in ("coverage", "finite_sample"):
                raise TraintimeError(f"SplitConformal has no parameter {k!r}")
            setattr(self, k, v)
        return self

    def __repr__(self) -> str:
        return f"SplitConformal(coverage={self.coverage!r}, finite_sample={self.finite_sample!r})"

    def fit(self, y_true: Any, y_pred: Any, groups: Any = None) -> SplitConformal:
        """Calibrate on out-of-fold predictions (positive values); ``groups``: their group labels."""
        if not 0 < self.coverage < 1:
            raise TraintimeError(f"coverage {self.coverage} must be between 0 and 1")
        yt = np.asarray(y_true, dtype=float)
        yp = np.asarray(y_pred, dtype=float)
        ok = (yt > 0) & (yp > 0) & np.isfinite(yt) & np.isfinite(yp)
        if not ok.any():
            raise TraintimeError("conformal calibration needs at least one positive measured/predicted pair")
        r = np.abs(np.log(yt[ok] / yp[ok]))
        if groups is None:
            n = r.size
            k = math.ceil((n + 1) * self.coverage) if self.finite_sample else math.ceil(n * self.coverage)
            self.q_ = float(np.sort(r)[k - 1]) if k <= n else float("inf")
            self.n_groups_ = n
        else:
            g = np.asarray(groups)[ok]
            labels, inv, counts = np.unique(g, return_inverse=True, return_counts=True)
            w = 1.0 / counts[inv]
            order = np.argsort(r)
            cw = np.cumsum(w[order]) / len(labels)
            level = (math.ceil((len(labels) + 1) * self.coverage) / len(labels) if self.finite_sample
                     else self.coverage)
            if level > 1:
                self.q_ = float("inf")
            else:
                self.q_ = float(r[order][min(np.searchsorted(cw, level - 1e-12), r.size - 1)])
            self.n_groups_ = len(labels)
        self.n_ = int(ok.sum())
        return self

    @property
    def log_halfwidth(self) -> float:
        return float(self.q_)

    def interval(self, y_pred: Any) -> tuple[np.ndarray, np.ndarray]:
        p = np.asarray(y_pred, dtype=float)
        return p * math.exp(-self.q_), p * math.exp(self.q_)

    def coverage_on(self, y_true: Any, y_pred: Any) -> float:
        """Share of (y_true, y_pred) pairs whose interval holds y_true (measured coverage)."""
        lo, hi = self.interval(y_pred)
        yt = np.asarray(y_true, dtype=float)
        return float(np.mean((yt >= lo) & (yt <= hi)))


from traintime.chronos.interval_math import combine_log_halfwidths  # noqa: E402,F401  (re-exported)


def min_calibration_groups(coverage: float) -> int:
    """The fewest calibration groups ``n`` for which the finite-sample level ``ceil((n + 1) c) / n`` is at most 1,
    i.e. ``n >= c / (1 - c)``: 9 at 90 %. Fewer groups cannot support a ``coverage`` interval (the corrected
    quantile is infinite; the plain empirical one is a quantile of a handful of groups and under-covers)."""
    if not 0 < coverage < 1:
        raise TraintimeError(f"coverage {coverage} must be between 0 and 1")
    return max(1, math.ceil(round(coverage / (1 - coverage), 9)))


def stratum_groups(strata: Any, groups: Any) -> np.ndarray:
    """One label per row for the (stratum, group) pair: fold "0" of two families are two groups."""
    return np.char.add(np.char.add(np.asarray(strata).astype(str), "\x1f"), np.asarray(groups).astype(str))


def stratum_pool(groups: Any, strata: Any, stratum: Any, coverage: float, group_weighted: bool = True,
                 pool_below: int | None = None, exclude: Any = None) -> tuple[np.ndarray, bool]:
    """(rows that calibrate an interval for ``stratum`` (a boolean mask), whether they are pooled): the rows of
    ``stratum`` (less ``exclude``) when they hold at least ``pool_below`` groups (rows when not ``group_weighted``;
    None: :func:`min_calibration_groups`; 0: always, the stratum alone), else the rows of every stratum (less
    ``exclude``)."""
    st = np.asarray(strata).astype(str)
    keep = ~np.asarray(exclude, dtype=bool) if exclude is not None else np.ones(len(st), dtype=bool)
    same = (st == str(stratum)) & keep
    n = len(np.unique(np.asarray(groups)[same])) if group_weighted else int(same.sum())
    if n >= (min_calibration_groups(coverage) if pool_below is None else pool_below):
        return same, False
    return keep, True


def calibration_mask(groups: Any, strata: Any, held_out: Any, coverage: float, group_weighted: bool = True,
                     pool_below: int | None = None) -> tuple[np.ndarray, bool]:
    """:func:`stratum_pool` for the interval of the rows ``held_out`` (a boolean mask): their stratum's other rows,
    or every stratum's other rows. ``strata`` None: one stratum."""
    held = np.asarray(held_out, dtype=bool)
    if strata is None or not held.any():
        return ~held, False
    stratum = np.asarray(strata).astype(str)[held][0]
    return stratum_pool(groups, strata, stratum, coverage, group_weighted, pool_below, exclude=held)


def grouped_coverage(y_true: Any, y_pred: Any, groups: Any, coverage: float = 0.9,
                     finite_sample: bool = True, min_groups: int = 1, floor: float = float("nan"),
                     group_weighted: bool = True, strata: Any = None,
                     pool_below: int | None = None) -> dict[str, float]:
    """Leave-one-group-out check of the conformal interval itself: for each group, calibrate on the other
    groups' residuals and count how many of this group's measurements its interval holds. A group whose
    calibration set has fewer than 2 rows or fewer than ``min_groups`` groups is not scored. ``strata`` (one label
    per row, e.g. the family): a group is a (stratum, group) pair, calibrated as :func:`calibration_mask` says
    (its stratum's other groups, or every stratum's where its own has fewer than ``pool_below``: by default
    :func:`min_calibration_groups`, 0 never pools); ``pooled_groups`` counts the
    held-out groups calibrated on the pool. ``floor``: a log
    half-width the interval is never narrower than (:func:`~traintime.chronos.interval_math.seed_floored_halfwidth`;
    NaN: none). ``group_weighted`` false: the calibration weighs every residual alike (one group per row, as
    ``traintime predict`` calibrates on shuffled K-fold residuals). ``hits``: per scored row, in the order of
    ``y_true``, whether it was held (None where not scored); ``log_halfwidths``: the interval's per scored row."""
    from traintime.chronos.interval_math import seed_floored_halfwidth

    yt, yp, g = np.asarray(y_true, float), np.asarray(y_pred, float), np.asarray(groups)
    if strata is not None:
        g = stratum_groups(strata, g)
    hits, n, pooled = 0, 0, 0
    widths = []
    per_row: list[bool | None] = [None] * len(yt)
    row_q = np.full(len(yt), np.nan)
    for label in np.unique(g):
        test = g == label
        cal, from_pool = calibration_mask(g, strata, test, coverage, group_weighted, pool_below)
        if cal.sum() < 2 or len(np.unique(g[cal])) < min_groups:
            continue
        pooled += int(from_pool)
        cp = SplitConformal(coverage, finite_sample).fit(yt[cal], yp[cal], g[cal] if group_weighted else None)
        q = seed_floored_halfwidth(cp.q_, floor)
        with np.errstate(divide="ignore", invalid="ignore"):  # a non-positive value is never held
            held = np.abs(np.log(yt[test] / yp[test])) <= q + 1e-12  # a residual equal to q is held (round-off)
        hits += int(held.sum())
        n += int(test.sum())
        widths.append(q)
        for i, h in zip(np.flatnonzero(test), held):
            per_row[i] = bool(h)
        row_q[test] = q
    return {"nominal": coverage, "measured": hits / n if n else float("nan"), "n": n, "covered": hits,
            "groups": int(len(np.unique(g))), "pooled_groups": pooled, "median_log_halfwidth": float(np.median(widths)) if widths else float("nan"),
            "hits": per_row, "log_halfwidths": row_q}
