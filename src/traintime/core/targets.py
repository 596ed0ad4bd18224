"""The numeric targets of issues 13-15 at a glance: what each asks, what the pipeline reached, the previous model or
baseline beside it, and one status rule for all (rule ``issue_targets``, ``results/tables/issue_targets.*``).

Every row is read from a table of the same run (:data:`TARGETS`: source table, the query that selects the reported
model's row, the value column and the 95 % interval over seeds); nothing is typed here but the targets themselves,
and where a source table carries its own target column, a row whose target differs from the one here is an error
(:class:`~traintime.core.errors.SchemaError`), so the two cannot drift apart. The reported model of a
row is fixed in advance: the model ``traintime predict`` uses, or a choice made in inner folds (the epoch rows
report ``nested``, the convergence estimator chosen inside each outer-training fold among
``chronos_convergence.nested_candidates``, with the paper's forest beside it as the previous model; the epoch-interval
rows report the model ``predict`` uses, ``chronos_convergence.final_method``, by default ``nested`` too).

Status (:func:`target_status`, the rule of every row): ``yes`` when the 95 % interval over seeds lies inside the
target, ``no`` when it lies wholly outside, ``inconclusive`` when it straddles a bound; with one seed, or a
deterministic model (no interval), the value itself decides. The "points better than partial pooling" rows take
the interval of the method's MAPE over seeds; the baseline's own spread over seeds (CV only; it is deterministic on
LOMO and LODO) is not added, so on CV that interval is somewhat too narrow. A source this run did not produce, or
one without a measured row (an optional data source absent offline), gives ``not evaluated`` with the reason,
never a number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.step_rule import auto_step
from traintime.core.verdict import t_interval

NOT_EVALUATED = "not evaluated"
#: Columns of ``results/tables/issue_targets.csv``, in order.
COLUMNS = ["issue", "goal", "target", "model", "reached", "ci95_low", "ci95_high", "n_seeds", "previous",
           "previous_value", "status", "source"]


def target_status(value: float, low: float, high: float, lower: float | None = None,
                  upper: float | None = None) -> str:
    """``yes`` / ``no`` / ``inconclusive`` for a target ``lower <= x <= upper`` (either bound may be None): the
    interval ``[low, high]`` (or the value alone when the interval is NaN) inside the target, wholly outside it,
    or across a bound."""
    if value is None or np.isnan(value):
        return NOT_EVALUATED
    lo, hi = (value, value) if (low is None or high is None or np.isnan(low) or np.isnan(high)) else (low, high)
    lo_ok = lower is None or lo >= lower
    hi_ok = upper is None or hi <= upper
    if lo_ok and hi_ok:
        return "yes"
    if (upper is not None and lo > upper) or (lower is not None and hi < lower):
        return "no"
    return "inconclusive"


@dataclass(frozen=True)
class Target:
    """One numeric target of an issue and where the pipeline's answer to it is.

    ``where`` / ``previous`` are pandas queries on ``results/tables/<table>.csv``; ``{step_model}`` in them is
    the step tables' name of the step model ``traintime predict`` uses (:func:`step_table_method`). The interval over
    seeds comes from ``ci`` columns, or is the Student-t interval of ``sd`` over ``n`` seeds."""

    issue: int
    goal: str
    table: str
    where: str
    value: str
    model: str
    lower: float | None = None
    upper: float | None = None
    ci: tuple[str, str] | None = None
    sd: str | None = None
    n: str | None = None
    previous: str | None = None
    previous_label: str = ""
    #: source column holding this target (must equal the bound here, see the module docstring), if the table has one
    target_column: str | None = None
    #: why a run may have no row for this target (shown in the status)
    absent: str = "no measured row in this run's source table"
    #: factor from the table's unit to the target's (0-1 coverage -> %)
    scale: float = 1.0

    def bound_text(self) -> str:
        if self.lower is not None and self.upper is not None:
            return f"{self.lower:g}-{self.upper:g}"
        return f"<= {self.upper:g}" if self.upper is not None else f">= {self.lower:g}"


_TWO = "predict_step_two_label"
_HOST = "steptime_host_power_law"
_POOL = "convergence_vs_pooling"
_COV = "convergence_interval_coverage"
_EXT = "predict_external_eval"
_STEP_MODEL = "`{step_model}`, the step model of `traintime predict`"
_PREV_STEP = "xgboost on step_time_ms (one label)"
_CONV = ("`nested` (chosen in each outer-training fold by inner folds of the protocol's kind among "
         "chronos_convergence.nested_candidates; `predict` uses {epochs_model})")


def _two_label(protocol: str, upper: float, caveat: str = "") -> Target:
    return Target(13, f"CHRONOS {protocol}: step-time MAPE %", _TWO,
                  f"protocol == 'chronos {protocol}' and method == '{{step_model}}'", "step_mape_pct_mean",
                  _STEP_MODEL + " + loader-wait model" + caveat, upper=upper,
                  ci=("step_mape_pct_ci95_low", "step_mape_pct_ci95_high"), n="n_seeds",
                  previous=f"protocol == 'chronos {protocol}' and method == 'previous: xgboost on step_time_ms'",
                  previous_label=_PREV_STEP, target_column="target_step_mape_pct")


def _host(protocol: str, goal: str, upper: float, previous: str, label: str) -> Target:
    return Target(13, goal, _HOST, f"protocol == '{protocol}' and method == 'power_law'", "mape_pct",
                  "`power_law` (ratio to the host GPU RTX 5090)", upper=upper,
                  previous=f"protocol == '{protocol}' and method == '{previous}'", previous_label=label,
                  target_column="target_pct")


def _pooling(protocol: str, goal: str, value: str, lower: float | None, upper: float | None,
             target_column: str | None) -> Target:
    return Target(14, goal, _POOL, f"protocol == '{protocol}' and method == 'nested'", value, _CONV,
                  lower=lower, upper=upper, sd="sd_pct", n="n_seeds",
                  previous=f"protocol == '{protocol}' and method == 'chronos_rf'",
                  previous_label="CHRONOS random forest (paper)", target_column=target_column)


def _coverage(protocol: str) -> Target:
    return Target(14, f"90 % epoch interval, {protocol.upper()}: coverage % of held-out runs", _COV,
                  f"protocol == '{protocol}' and method == '{{epochs_model}}' and interval == 'seed_floored'",
                  "coverage_mean_pct",
                  "`{epochs_model}`: `predict`'s split-conformal interval floored at the seed spread",
                  lower=85.0, upper=95.0, sd="coverage_sd_pct", n="n_seeds",
                  previous=f"protocol == '{protocol}' and method == '{{epochs_model}}' and interval == "
                           "'residual_own_family'",
                  previous_label="calibrated on the family's own folds only (before)")


def _external(precision: str, goal: str, value: str, lower: float | None, upper: float | None,
              column: str) -> Target:
    return Target(15, goal, _EXT, f"precision == '{precision}'", value, _STEP_MODEL + " (predict's default answer)",
                  lower=lower, upper=upper, target_column=column,
                  absent="optional source data.sources.lambda_benchmark absent: not in the offline mirror")


#: Every numeric target of issues 13-15, in issue order (see the module docstring).
TARGETS: tuple[Target, ...] = (
    Target(13, "CHRONOS LOGO: compute-time MAPE %", _TWO, "protocol == 'chronos LOGO' and method == '{step_model}'",
           "compute_mape_pct", _STEP_MODEL + " (deterministic)", upper=15.0,
           previous="protocol == 'chronos LOGO' and method == 'roofline_calibrated'",
           previous_label="calibrated roofline (physics, refitted per family without the held-out GPU)"),
    _two_label("LOGO", 25.0),
    _two_label("LOMO", 40.0, "; its inner split by model was set after a look at these folds "
                             "(traintime.chronos.neighbour_step: model_splits)"),
    _two_label("LODO", 35.0),
    _host("LOGO, main slice", "traces LOGO fp32 batch 16, with a host: MAPE %", 10.0, "learned",
          "learned LOGO (previous model)"),
    _host("LOGO, all settings pooled", "traces LOGO all settings, with a host: MAPE %", 12.0, "flops",
          "FLOPS scaling (zero-shot paper's baseline)"),
    _host("leave one generation out, all settings", "traces leave one generation out, with a host: MAPE %", 15.0,
          "flops", "FLOPS scaling (zero-shot paper's baseline)"),
    Target(13, "traces LOGO without a host: MAPE % (all settings pooled; issue: fp32 batch 16)",
           "predict_step_grouped", "protocol == 'traces LOGO' and method == '{step_model}'", "mape_pct",
           _STEP_MODEL + " (specs + graph only)", upper=15.0,
           previous="protocol == 'traces LOGO' and method == 'roofline_assumed'",
           previous_label="roofline with assumed efficiency"),
    _pooling("cv", "epochs, 5-fold CV: MAPE %", "avg_model_mape_pct", None, 18.0, "target_pct"),
    _pooling("lomo", "epochs, LOMO: MAPE %", "avg_model_mape_pct", None, 25.0, "target_pct"),
    *(_pooling(p, f"epochs, {p.upper()}: points better than partial pooling", "better_than_baseline_by", 3.0,
               None, None) for p in ("cv", "lomo", "lodo")),
    Target(14, "stopping epoch from 3 observed epochs: MAPE %", "convergence_curves",
           "k == 3 and method == 'selected'", "mape_mean_pct",
           "curve variant chosen by inner leave-one-configuration-out CV", upper=10.0,
           ci=("mape_ci95_lo", "mape_ci95_hi"), n="n_seeds", previous="k == 3 and method == 'no_curve_median'",
           previous_label="median of the other configurations (no curve)", target_column="target_pct"),
    *(_coverage(p) for p in ("cv", "lomo", "lodo")),
    _external("fp16", "Lambda ResNet-50 fp16 (data-center GPUs): step-time MAPE %", "mape_pct", None, 25.0,
              "target_mape_pct"),
    _external("fp32", "Lambda ResNet-50 fp32 (data-center GPUs): step-time MAPE %", "mape_pct", None, 25.0,
              "target_mape_pct"),
    _external("fp16", "Lambda ResNet-50 fp16: % of GPU pairs in the right order", "pairs_right_pct", 90.0, None,
              "target_pairs_pct"),
    _external("fp32", "Lambda ResNet-50 fp32: % of GPU pairs in the right order", "pairs_right_pct", 90.0, None,
              "target_pairs_pct"),
    Target(15, "90 % step interval, leave one GPU out: coverage % of held-out rows", "predict_step_grouped_coverage",
           "quantity.str.contains('{step_model}, leave-one-GPU-out, half-width of the row') and variant.str.contains("
           "'what predict uses')", "measured_coverage", "the step interval `predict` prints for a measured workload",
           lower=85.0, upper=95.0, scale=100.0, absent="no coverage row for the step model predict uses",
           previous="quantity.str.contains('{step_model}, leave-one-GPU-out, both sources')",
           previous_label="one half-width for both sources"),
    Target(15, "90 % step interval, unseen workload (leave one model out): coverage %", "predict_step_grouped_coverage",
           "quantity.str.contains('{step_model}, leave-one-model-out')", "measured_coverage",
           "the step interval `predict` prints for a workload never measured", lower=85.0, upper=95.0, scale=100.0,
           absent="no coverage row for the step model predict uses"),
    Target(15, "90 % epoch interval, leave one model out: coverage % of held-out runs", "predict_interval_coverage",
           "quantity.str.startswith('epochs') and family == 'all' and variant == 'empirical quantile'",
           "measured_coverage", "the epoch interval `predict` prints (split-conformal, `{epochs_model}`)",
           lower=85.0, upper=95.0, scale=100.0,
           previous="quantity.str.startswith('epochs') and family == 'all' and variant.str.contains('own family')",
           previous_label="calibrated on the family's own models only (before)"),
)


#: ``--step-model`` name (:func:`traintime.predict_step_models.auto_step_model`) -> its method name in the step tables
STEP_TABLE_METHOD = {"neighbour": "neighbour", "roofline": "roofline_calibrated"}


def auto_step_name(neighbour_model_json: str | Path) -> str:
    """What ``--step-model auto`` resolves to (``neighbour`` or ``roofline``): :func:`traintime.core.step_rule.auto_step`
    on the neighbour model file of the run."""
    return auto_step(neighbour_model_json)[0]


def step_table_method(step_model: str) -> str:
    """The step tables' method name of the ``--step-model`` that ``auto`` resolved to."""
    if step_model not in STEP_TABLE_METHOD:
        raise SchemaError(f"step model {step_model!r} has no row in the step tables (known: {sorted(STEP_TABLE_METHOD)})")
    return STEP_TABLE_METHOD[step_model]


def _one(df: pd.DataFrame, query: str, what: str) -> pd.Series | None:
    rows = df.query(query)
    if len(rows) > 1:
        raise SchemaError(f"{what}: query {query!r} selects {len(rows)} rows, not one")
    return rows.iloc[0] if len(rows) else None


def _num(row: pd.Series, col: str | None, scale: float = 1.0) -> float:
    if col is None or col not in row.index:
        return float("nan")
    v = pd.to_numeric(row[col], errors="coerce")
    return scale * float(v) if v is not None and not pd.isna(v) else float("nan")


def evaluate_target(t: Target, df: pd.DataFrame | None, names: Mapping[str, str]) -> dict[str, object]:
    """One row of the targets table for target ``t`` from its source table ``df`` (None: not produced)."""
    where = t.where.format(**names)
    row = _one(df, where, t.table) if df is not None else None
    base: dict[str, object] = {"issue": t.issue, "goal": t.goal, "target": t.bound_text(),
                               "model": t.model.format(**names), "source": f"tables/{t.table}.csv"}
    value = _num(row, t.value, t.scale) if row is not None else float("nan")
    if np.isnan(value):
        why = "source table not produced by this run" if df is None else t.absent
        return {**base, "reached": np.nan, "ci95_low": np.nan, "ci95_high": np.nan, "n_seeds": np.nan,
                "previous": t.previous_label, "previous_value": np.nan, "status": f"{NOT_EVALUATED} ({why})"}
    declared = _num(row, t.target_column)
    if not np.isnan(declared) and declared != (t.upper if t.upper is not None else t.lower):
        raise SchemaError(f"{t.table}.{t.target_column} = {declared:g} for {where!r}, but the target of "
                          f"{t.goal!r} here is {t.bound_text()}")
    n = _num(row, t.n)
    lo, hi = (_num(row, t.ci[0], t.scale), _num(row, t.ci[1], t.scale)) if t.ci else (float("nan"), float("nan"))
    if t.sd is not None and not np.isnan(_num(row, t.sd)) and n >= 2:
        lo, hi, _ = t_interval(value, _num(row, t.sd, t.scale), int(n))
    prev = _one(df, t.previous.format(**names), t.table) if t.previous and df is not None else None
    return {**base, "reached": value, "ci95_low": lo, "ci95_high": hi, "n_seeds": n, "previous": t.previous_label,
            "previous_value": _num(prev, t.value, t.scale) if prev is not None else np.nan,
            "status": target_status(value, lo, hi, t.lower, t.upper)}


def targets_table(tables_dir: str | Path, step_model: str, targets: tuple[Target, ...] = TARGETS,
                  epochs_model: str = "nested") -> pd.DataFrame:
    """Every target of ``targets`` against the tables under ``tables_dir`` (see the module docstring);
    ``step_model``: the ``--step-model`` that ``auto`` resolves to (``neighbour`` or ``roofline``); ``epochs_model``:
    the saved convergence model ``predict`` uses (``chronos_convergence.final_method``)."""
    names = {"step_model": step_table_method(step_model), "epochs_model": str(epochs_model)}
    cache: dict[str, pd.DataFrame | None] = {}
    out = []
    for t in targets:
        if t.table not in cache:
            path = Path(tables_dir) / f"{t.table}.csv"
            cache[t.table] = pd.read_csv(path) if path.is_file() else None
        out.append(evaluate_target(t, cache[t.table], names))
    return pd.DataFrame(out, columns=COLUMNS)


def status_counts(table: pd.DataFrame) -> str:
    """One line: how many targets are met, not met, inconclusive, not evaluated."""
    s = table["status"].astype(str).str.replace(r" \(.*\)$", "", regex=True)
    parts = [f"{int((s == k).sum())} {label}" for k, label in
             (("yes", "met"), ("no", "not met"), ("inconclusive", "inconclusive"), (NOT_EVALUATED, NOT_EVALUATED))]
    return f"{len(table)} targets: " + ", ".join(parts) + "."


def _fmt(x: object) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{float(x):.1f}"  # type: ignore[arg-type]


def targets_markdown(table: pd.DataFrame) -> str:
    """The README block: status counts, then one line per target (interval shown when measured)."""
    lines = [status_counts(table), "",
             "| issue | goal | target | reached (95 % interval) | model | previous / baseline | status |",
             "|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        ci = f" ({_fmt(r.ci95_low)}-{_fmt(r.ci95_high)})" if _fmt(r.ci95_low) else ""
        prev = f"{r.previous}: {_fmt(r.previous_value)}" if _fmt(r.previous_value) else str(r.previous or "")
        lines.append(f"| {r.issue} | {r.goal} | {r.target} | {_fmt(r.reached)}{ci} | {r.model} | {prev} | "
                     f"{r.status} |")
    return "\n".join(lines) + "\n"
