"""One verdict rule for every published claim (CHRONOS and zero-shot); the rule is documented in
the module docstring of :mod:`traintime.chronos.claims`.

:func:`value_verdict` decides a numeric claim from the reproduced mean, its sd over seeds and the
number of seeds: *inconclusive* when the 95 % Student-t interval of the mean is wider than the
tolerance (half-width > 10 % of |published|), else *reproduced* when |mean - published| <= the
tolerance, else *not reproduced*. :func:`bound_verdict` applies the same interval to a published
bound. :func:`verdict_counts` / :func:`write_verdict_counts` count the verdicts of claim tables.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd
from scipy import stats

#: Relative tolerance of every numeric claim: 10 % of |published|. Never widened by the seed spread.
REL_TOL = 0.10
#: Confidence of the interval of the mean over seeds (two-sided Student-t, n - 1 degrees of freedom).
CONFIDENCE = 0.95

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive"
NOT_REPRODUCIBLE = "not reproducible from released data"
NOT_EVALUATED = "not evaluated"
#: Every verdict a claim table can carry, in reporting order.
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_REPRODUCIBLE, NOT_EVALUATED)
#: Column names of the counts table (one per verdict).
COUNT_COLUMNS = {REPRODUCED: "reproduced", NOT_REPRODUCED: "not_reproduced", INCONCLUSIVE: "inconclusive",
                 NOT_REPRODUCIBLE: "not_reproducible", NOT_EVALUATED: "not_evaluated"}


#: The verdict rule as markdown, shared by both claims tables (and the README).
VERDICT_RULE_MD = f"""**Verdict rule** (one rule for every claim). Numeric claims (errors, times, ranks, ratios,
correlations): tolerance = {REL_TOL:.0%} of |published|, never widened by the seed spread. The 95% interval of
the mean over seeds is the Student-t interval mean +- t(0.975, n-1) x sd / sqrt(n) (zero width for one seed).
*{INCONCLUSIVE}* when that interval's half-width exceeds the tolerance (column *interval_95*; seed noise never
yields *reproduced*); else *{REPRODUCED}* when |mean - published| <= tolerance; else *{NOT_REPRODUCED}*
(column *difference*: reproduced - published, signed; a better-than-published number is also *not
reproduced*). Published bounds (`< x`) hold when the whole interval is at or below the bound
(inconclusive when it contains the bound); counts, names and statements must match exactly.
*{NOT_REPRODUCIBLE}*: the release lacks what the claim needs (reason given)."""


@dataclass(frozen=True)
class Verdict:
    """A verdict with its numbers: tolerance, signed difference (mean - published) and the 95 %
    interval of the mean (``ci_low``, ``ci_high``; equal to the mean for one seed). NaN where the
    check has no such number (counts, statements, sets, claims not addressed)."""

    verdict: str
    reason: str
    tolerance: float = math.nan
    difference: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan


def _num(x: float | None) -> float:
    return math.nan if x is None else float(x)


def t_interval(mean: float, sd: float | None, n: int, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(low, high, half-width) of the two-sided Student-t interval of a mean over ``n`` seeds:
    mean +- t_{(1+confidence)/2, n-1} x sd / sqrt(n). One seed, or no sd: a zero-width interval
    (a deterministic value)."""
    sd = _num(sd)
    if n < 2 or math.isnan(sd) or sd == 0.0:
        return mean, mean, 0.0
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half, half


def _missing(mean: float | None) -> bool:
    return mean is None or (isinstance(mean, float) and math.isnan(mean))


def value_verdict(published: float, mean: float, sd: float | None = 0.0, n: int = 1,
                  rel_tol: float = REL_TOL) -> Verdict:
    """The verdict of a numeric claim (value, rank, ratio or correlation alike).

    tolerance = ``rel_tol`` x |published|. Order of the checks: *inconclusive* when the interval's
    half-width exceeds the tolerance (seed noise can never yield *reproduced*); *reproduced* when
    |mean - published| <= tolerance; else *not reproduced* with the signed difference.
    """
    if published is None or math.isnan(float(published)):
        raise ValueError("a value claim needs a published value")
    if _missing(mean):
        return Verdict(NOT_EVALUATED, "reproduced value missing (input table absent or empty)")
    published, mean = float(published), float(mean)
    tol = rel_tol * abs(published)
    lo, hi, half = t_interval(mean, sd, n)
    diff = mean - published
    rel = f" ({diff / abs(published) * 100:+.0f}%)" if published else ""
    common = dict(tolerance=tol, difference=diff, ci_low=lo, ci_high=hi)
    if half > tol:
        return Verdict(INCONCLUSIVE, f"95% interval of the mean over {n} seeds [{lo:.4g}, {hi:.4g}] is wider than "
                                     f"the tolerance +-{tol:.3g} ({rel_tol:.0%} of {published:g}); "
                                     f"difference {diff:+.3g}{rel}", **common)
    if abs(diff) <= tol:
        return Verdict(REPRODUCED, f"difference {diff:+.3g}{rel} within +-{tol:.3g} ({rel_tol:.0%} of "
                                   f"{published:g})", **common)
    side = "lower" if diff < 0 else "higher"
    return Verdict(NOT_REPRODUCED, f"reproduction {side} than published: difference {diff:+.3g}{rel}, "
                                   f"tolerance +-{tol:.3g}", **common)


def bound_verdict(bound: float, mean: float, sd: float | None = 0.0, n: int = 1) -> Verdict:
    """A published upper bound (``< x``): *reproduced* when the whole 95 % interval of the mean lies
    at or below the bound, *not reproduced* when it lies wholly above, else *inconclusive*."""
    if _missing(mean):
        return Verdict(NOT_EVALUATED, "reproduced value missing (input table absent or empty)")
    bound, mean = float(bound), float(mean)
    lo, hi, half = t_interval(mean, sd, n)
    common = dict(difference=mean - bound, ci_low=lo, ci_high=hi)
    if hi <= bound:
        return Verdict(REPRODUCED, f"{mean:.4g} <= bound {bound:g}" + (f" (95% interval up to {hi:.4g})" if half else ""),
                       **common)
    if lo > bound:
        return Verdict(NOT_REPRODUCED, f"{mean:.4g} > bound {bound:g}", **common)
    return Verdict(INCONCLUSIVE, f"95% interval [{lo:.4g}, {hi:.4g}] contains the bound {bound:g}", **common)


def exact_verdict(ok: bool, reason: str) -> Verdict:
    """A deterministic check (count, statement, share of configurations, set of names)."""
    return Verdict(REPRODUCED if ok else NOT_REPRODUCED, reason)


def verdict_counts(tables: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Claims per verdict: one row per named claims table (column ``verdict``) and a ``total`` row.

    Columns: ``paper``, ``claims``, then :data:`COUNT_COLUMNS` (reproduced, not_reproduced,
    inconclusive, not_reproducible, not_evaluated).
    """
    rows = []
    for name, t in tables.items():
        unknown = sorted(set(t["verdict"]) - set(VERDICTS))
        if unknown:
            from traintime.core.errors import SchemaError

            raise SchemaError(f"claims table {name!r} has unknown verdict(s) {', '.join(map(repr, unknown))}")
        counts = t["verdict"].value_counts()
        rows.append({"paper": name, "claims": len(t),
                     **{col: int(counts.get(v, 0)) for v, col in COUNT_COLUMNS.items()}})
    out = pd.DataFrame(rows, columns=["paper", "claims", *COUNT_COLUMNS.values()])
    total = {"paper": "total", **{c: int(out[c].sum()) for c in out.columns if c != "paper"}}
    return pd.concat([out, pd.DataFrame([total])], ignore_index=True)


def write_verdict_counts(paths: Mapping[str, str | os.PathLike[str]], out_csv: str | os.PathLike[str]) -> pd.DataFrame:
    """Read claims CSVs (name -> path), count their verdicts (:func:`verdict_counts`), write ``out_csv``."""
    from traintime.core.io import read_csv, write_csv

    table = verdict_counts({name: read_csv(p) for name, p in paths.items()})
    write_csv(table, out_csv)
    return table
