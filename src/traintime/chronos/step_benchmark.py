"""Issue 13's benchmark of the step-time predictor: per protocol and data source, the error of the new model and of
the previous one on the same outer folds, and the wall time of one fit (rule ``predict_step_benchmark``, script
``benchmarks/step_models.py``).

Models
    new: ``neighbour`` (:class:`traintime.chronos.neighbour_step.NestedNeighbourStepTime`, the step model of
    ``traintime predict``); previous: ``roofline_calibrated``, ``predict``'s step model before it (compute label), and
    on the CHRONOS step-time label the project's one-label XGBoost on ``step_time_ms`` (:mod:`traintime.chronos.two_label`,
    whose new row adds the loader-wait model to the neighbour model's compute time). With a host measurement (the traces'
    ratio to the host GPU): new ``power_law`` (:class:`traintime.emulation.power_law.PowerLawRatio`), previous the
    learned XGBoost baseline of the zero-shot tables where it was scored (leave one GPU out, main slice), else FLOPS
    scaling (nothing fitted).
Errors
    Pooled MAPE over the out-of-fold rows: compute label from ``results/tables/predict_step_grouped.csv`` (deterministic
    fits, one run), step label from ``results/tables/predict_step_two_label.csv`` (mean and sd over seeds), with-host
    rows from ``results/tables/steptime_host_power_law.csv``.
Fit time
    ``fit_s_mean``: mean wall seconds of one fit on an outer training fold, measured by rules ``predict_step_grouped``
    and ``emulation_power_law`` (one core; a nested model's fit includes its inner choice) and kept apart from their
    tables, which stay identical from run to run: :func:`split_fit_times` writes them to
    ``results/logs/predict/step_grouped_fit_times.csv`` and ``results/logs/emulation/power_law_fit_times.csv``.
    Blank where the rule did not fit the model on the fold: FLOPS scaling fits nothing, the trace protocols'
    calibrated roofline is the calibration saved once on CHRONOS, the learned with-host baseline is fitted by rule
    ``emulation_learned`` and the one-label XGBoost by rule ``chronos_iteration_evaluate`` (its log gives the time of
    each of its fits). On the step label the new model's time is that of its compute model (the loader-wait model's
    fit is not timed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError

NEW = "neighbour"
PREVIOUS_COMPUTE = "roofline_calibrated"
PREVIOUS_STEP = "previous: xgboost on step_time_ms"
#: with-host rows: new method, and the previous ones in order of preference (the first scored on the protocol)
HOST_NEW, HOST_PREVIOUS = "power_law", ("learned", "flops")
COLUMNS = ["source", "protocol", "label", "new_method", "new_mape_pct", "new_mape_sd", "new_fit_s",
           "previous_method", "previous_mape_pct", "previous_mape_sd", "previous_fit_s", "rows", "folds"]


#: column of the fit times (seconds) in the tables of :func:`benchmark_table` and in the fit-time records
FIT_COLUMN = "fit_s_mean"
FIT_KEYS = ["protocol", "method"]


def split_fit_times(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``table`` without :data:`FIT_COLUMN`, its fit times: :data:`FIT_KEYS` + :data:`FIT_COLUMN`): the wall times
    differ from run to run, the rest of the table does not, so they are written to separate files."""
    _need(table, [*FIT_KEYS, FIT_COLUMN], "table with fit times")
    return table.drop(columns=FIT_COLUMN), table[[*FIT_KEYS, FIT_COLUMN]].copy()


def with_fit_times(table: pd.DataFrame, fit_times: pd.DataFrame) -> pd.DataFrame:
    """``table`` with the :data:`FIT_COLUMN` of its fit-time record (:func:`split_fit_times`; NaN where none)."""
    _need(fit_times, [*FIT_KEYS, FIT_COLUMN], "fit-time record")
    return table.merge(fit_times[[*FIT_KEYS, FIT_COLUMN]], on=FIT_KEYS, how="left", validate="many_to_one")


def _need(table: pd.DataFrame, columns: list[str], name: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise SchemaError(f"{name}: missing column(s) {', '.join(missing)}")


def _pairs(table: pd.DataFrame, new: str, previous: tuple[str, ...]) -> list[tuple[str, dict, dict]]:
    """(protocol, row of ``new``, row of the first of ``previous`` scored on it) per protocol of ``table`` where both
    were scored, in the table's order."""
    by = {(p, m): r for p, m, r in zip(table["protocol"], table["method"], table.to_dict("records"))}
    out = []
    for proto in dict.fromkeys(table["protocol"]):
        prev = next((by[(proto, m)] for m in previous if (proto, m) in by), None)
        if (proto, new) in by and prev is not None:
            out.append((proto, by[(proto, new)], prev))
    return out


def _row(source: str, protocol: str, label: str, new_method: str, new: tuple[float, float, float], previous_method: str,
         previous: tuple[float, float, float], rows: int, folds: float) -> dict:
    """A row of :data:`COLUMNS`; ``new`` / ``previous``: (MAPE %, its sd over seeds, fit seconds)."""
    return dict(zip(COLUMNS, [source, protocol, label, new_method, *new, previous_method, *previous, rows, folds]))


def benchmark_table(grouped: pd.DataFrame, two_label: pd.DataFrame | None = None,
                    host: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (protocol, label) where both models were scored (:data:`COLUMNS`, module doc). ``grouped``:
    ``predict_step_grouped.csv``; ``two_label``: ``predict_step_two_label.csv``; ``host``:
    ``steptime_host_power_law.csv`` (None: without those rows); ``grouped`` and ``host`` with their fit times
    (:func:`with_fit_times`)."""
    _need(grouped, ["protocol", "method", "rows", "folds", "mape_pct", FIT_COLUMN], "predict_step_grouped table")
    nan = np.nan
    pairs = _pairs(grouped, NEW, (PREVIOUS_COMPUTE,))
    rows = [_row(proto.split()[0], proto, "compute", NEW, (new["mape_pct"], nan, new[FIT_COLUMN]), PREVIOUS_COMPUTE,
                 (prev["mape_pct"], nan, prev[FIT_COLUMN]), new["rows"], new["folds"]) for proto, new, prev in pairs]
    compute = {proto: new for proto, new, _ in pairs}
    if two_label is not None and len(two_label):
        _need(two_label, ["protocol", "method", "rows", "step_mape_pct_mean", "step_mape_pct_sd"],
              "predict_step_two_label table")
        for proto, new, prev in _pairs(two_label, NEW, (PREVIOUS_STEP,)):
            c = compute.get(proto, {})
            rows.append(_row(proto.split()[0], proto, "step (compute + loader wait)", f"{NEW} + loader-wait model",
                             (new["step_mape_pct_mean"], new["step_mape_pct_sd"], c.get(FIT_COLUMN, nan)),
                             PREVIOUS_STEP.removeprefix("previous: "),
                             (prev["step_mape_pct_mean"], prev["step_mape_pct_sd"], nan), new["rows"],
                             c.get("folds", nan)))
    if host is not None and len(host):
        _need(host, ["protocol", "method", "host_gpu", "rows", "folds", "mape_pct", FIT_COLUMN],
              "steptime_host_power_law table")
        rows += [_row(f"traces, host {new['host_gpu']}", proto, "compute", HOST_NEW, (new["mape_pct"], nan,
                      new[FIT_COLUMN]), prev["method"], (prev["mape_pct"], nan, prev[FIT_COLUMN]), new["rows"],
                      new["folds"])
                 for proto, new, prev in _pairs(host, HOST_NEW, HOST_PREVIOUS)]
    return pd.DataFrame(rows, columns=COLUMNS)


def benchmark_from_files(grouped: str | Path, grouped_fit_times: str | Path, two_label: str | Path | None = None,
                         host: str | Path | None = None, host_fit_times: str | Path | None = None) -> pd.DataFrame:
    """:func:`benchmark_table` from the files of a run (rule ``predict_step_benchmark`` and
    ``benchmarks/step_models.py``): each table with its fit-time record (:func:`with_fit_times`); None leaves the
    two-label or the with-host rows out."""
    from traintime.core.io import read_csv

    return benchmark_table(with_fit_times(read_csv(grouped), read_csv(grouped_fit_times)),
                           read_csv(two_label) if two_label is not None else None,
                           with_fit_times(read_csv(host), read_csv(host_fit_times)) if host is not None else None)


def _num(v: float, fmt: str) -> str:
    return "-" if v is None or not np.isfinite(v) else format(v, fmt)


def _mape(v: float, sd: float) -> str:
    return _num(v, ".1f") + ("" if sd is None or not np.isfinite(sd) else f" +- {sd:.1f}")


def render(table: pd.DataFrame) -> str:
    """The lines ``benchmarks/step_models.py`` prints: one per row of :func:`benchmark_table`, aligned."""
    head = ["source", "protocol", "label", "new model", "MAPE %", "fit s", "previous model", "MAPE %", "fit s"]
    body = [[r.source, r.protocol.removeprefix(f"{r.source} "), r.label, r.new_method, _mape(r.new_mape_pct, r.new_mape_sd),
             _num(r.new_fit_s, ".2f"), r.previous_method, _mape(r.previous_mape_pct, r.previous_mape_sd),
             _num(r.previous_fit_s, ".2f")] for r in table.itertuples(index=False)]
    width = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    right = {4, 5, 7, 8}
    lines = ["  ".join(str(x).rjust(w) if i in right else str(x).ljust(w) for i, (x, w) in enumerate(zip(row, width)))
             .rstrip() for row in [head, *body]]
    return "\n".join(lines) + "\n"
