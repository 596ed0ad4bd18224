"""Step-time models of ``traintime predict`` by name (``--step-model``): which one, its interval and its notes.

:func:`default_step_model` returns (model with ``predict(rows) -> ms`` and ``label``, step log half-width, notes for
the output header); ``auto`` (the default) applies the pre-declared rule recorded in the neighbour model file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import ArgumentError
from traintime.core.step_rule import NEIGHBOUR_MODEL_FILE, RULE_TEXT, auto_step

#: step-time models ``--step-model`` names (default first). results/tables/predict_step_grouped.md compares the
#: learned ones with the calibrated roofline on grouped outer folds of both sources (consumer-GPU traces: leave one
#: GPU / model / generation out; CHRONOS: leave one GPU, model or dataset out). The rule fixed before the comparison:
#: a model becomes the default only if it beats the calibrated roofline on every protocol of
#: :data:`~traintime.core.step_rule.RULE_PROTOCOLS`
#: (CHRONOS leave one model / dataset out were added later and are reported beside it). ``neighbour``
#: does (traces LOGO 13.8 vs 347 %, CHRONOS LOGO 38.3 vs 42.3 % MAPE on the run that introduced it), ``efficiency``
#: does not (CHRONOS LOGO 44.6 %); ``auto`` applies the rule to the model file of the current run, so the default
#: follows the results. The operator model (results/tables/predict_step_model_selection.md) needs the opt-in
#: steptime stage, is fitted at each call and has no conformal interval.
STEP_MODELS: dict[str, str] = {
    "auto": f"neighbour when its model file records that it beat the calibrated roofline on {RULE_TEXT} (rule "
            "predict_step_grouped), else roofline; the output names the one used (default)",
    "roofline": "roofline with per-family constants calibrated on CHRONOS compute times",
    "roofline-assumed": "roofline with assumed constants (compute 0.40, memory 0.60, launch 5 us; no calibration)",
    "efficiency": "roofline x smooth learned efficiency (work size, intensity, precision, GPU), fitted on CHRONOS "
                  "compute times and the consumer-GPU traces (results/tables/predict_step_grouped.md)",
    "neighbour": "roofline x the efficiency of the nearest measured workloads, log-linear in GPU peak / bandwidth, "
                 "fitted on CHRONOS compute times and the consumer-GPU traces (results/tables/predict_step_grouped.md)",
    "operator": "operator-level roofline x learned efficiency (OperatorRooflineRegressor) fitted on CHRONOS compute "
                "times now; walks the model's operator graph (torch; cached)",
}


def default_step_model(models_dir: Path, data_dir: Path, family: str, specs_rows: pd.DataFrame,
                       coverage: float, calibration: str | None = None,
                       step_model: str = "auto") -> tuple[Any, float, list[str]]:
    """(step model, step log half-width, notes). ``step_model='auto'`` (default): ``neighbour`` when
    ``<models_dir>/steptime/neighbour_model.json`` exists and records ``wins_grouped`` (the rule fixed before the
    comparison, :mod:`traintime.core.step_rule`), else ``roofline``; the
    first note says which and why. ``'roofline-assumed'``: the assumed constants, no
    interval. ``'roofline'``: the roofline with the constants of
    ``<models_dir>/steptime/roofline_calibration.json`` (rule predict_interval_coverage) when present, else
    fitted now on ``<data_dir>/iteration.csv`` (slower), else the assumed constants (no interval)."""
    from traintime.chronos.roofline_frozen import (
        FrozenRoofline,
        frozen_from_calibration,
    )

    if step_model not in STEP_MODELS:
        raise ArgumentError(f"--step-model {step_model!r}: use one of {', '.join(STEP_MODELS)}")
    if step_model == "auto":
        chosen, why = auto_step_model(models_dir)
        m, q, notes = default_step_model(models_dir, data_dir, family, specs_rows, coverage, calibration, chosen)
        return m, q, [f"step-time model chosen by --step-model auto: {chosen} ({why})", *notes]
    if step_model == "roofline-assumed":
        m = FrozenRoofline(0.40, 0.60, 5.0, fitted=False)
        return m, float("nan"), [f"step-time model (--step-model roofline-assumed): {m.label}; not calibrated",
                                 "step interval: none (assumed constants)"]
    if step_model in FROZEN_STEP_MODELS:
        return frozen_step_model(models_dir, coverage, step_model)
    if step_model == "operator":
        from traintime.predict_operator import operator_step_model

        m = operator_step_model(data_dir, specs_rows)
        return m, float("nan"), [f"step-time model (--step-model operator): {m.label}",
                                 "step interval: none (no conformal calibration of the operator model yet)"]
    cal_path = Path(calibration) if calibration else models_dir / "steptime" / "roofline_calibration.json"
    try:
        cal = json.loads(cal_path.read_text()) if cal_path.exists() else None
    except (OSError, ValueError) as exc:
        from traintime.core.errors import SchemaError

        raise SchemaError(f"step-time calibration {cal_path} cannot be read ({exc})") from None
    if cal is not None:
        m = frozen_from_calibration(cal, family)
        fam = cal.get("families", {}).get(family)
        if m is not None and fam:
            q = float(fam["step_log_halfwidth"]) if abs(float(cal.get("coverage", 0)) - coverage) < 1e-9 else float("nan")
            notes = [f"step-time model (--step-model roofline): {m.label}, calibrated on {fam['rows']} {family} rows "
                     f"({cal.get('measured_column')}; {cal_path}); leave-one-GPU-out MAPE {fam['logo_mape_pct']:.1f}%"]
            notes.append("step interval: split conformal on leave-one-GPU-out residuals "
                         f"({len(fam['gpus'])} GPUs)" if q == q else
                         f"step interval: none (calibrated at coverage {cal.get('coverage')}, asked {coverage})")
            return m, q, notes
    from traintime.chronos.roofline_step import RooflineStepTime
    from traintime.predict_plan import _iteration_step_rows, step_conformal

    m = RooflineStepTime()
    path = data_dir / "iteration.csv"
    if path.exists():
        from traintime.core.io import read_csv

        table = read_csv(path, low_memory=False)
        rows = _iteration_step_rows(table, specs_rows)
        rows = rows[rows["family"] == family]
        if len(rows):
            m.fit(rows, rows["measured_ms"])
            q, note = step_conformal(m, rows, family, coverage)
            return m, q, [f"step-time model (--step-model roofline): {m.label} on {len(rows)} {family} rows of {path} "
                          f"({rows.attrs.get('measured')}; fitted now, {cal_path} not found)", note]
    return m, float("nan"), [f"step-time model (--step-model roofline): {m.label}; NOT calibrated ({cal_path} and {path} not found)",
                             "step interval: none (no calibration data)"]


def auto_step_model(models_dir: Path) -> tuple[str, str]:
    """(``neighbour`` or ``roofline``, why) for ``--step-model auto``: the rule of :mod:`traintime.core.step_rule`
    applied to ``<models_dir>/steptime/neighbour_model.json``."""
    return auto_step(models_dir / "steptime" / NEIGHBOUR_MODEL_FILE)


#: frozen JSON step models written by rule predict_step_grouped: --step-model name -> (file, loader)
FROZEN_STEP_MODELS: dict[str, tuple[str, str]] = {
    "efficiency": ("efficiency_model.json", "traintime.chronos.efficiency_frozen:load_frozen_efficiency"),
    "neighbour": (NEIGHBOUR_MODEL_FILE, "traintime.chronos.neighbour_frozen:load_frozen_neighbour"),
}


def frozen_step_model(models_dir: Path, coverage: float, name: str = "efficiency") -> tuple[Any, float, list[str]]:
    """(frozen step model, step log half-width, notes) of ``--step-model name`` from
    ``<models_dir>/steptime/<file>`` (:data:`FROZEN_STEP_MODELS`, rule predict_step_grouped); numpy only. The
    interval is the split-conformal half-width of its pooled leave-one-GPU-out residuals (traces and CHRONOS)
    when calibrated at ``coverage``."""
    import importlib

    from traintime.core.errors import DataUnavailableError

    fname, loader = FROZEN_STEP_MODELS[name]
    mod, fn = loader.split(":")
    path = models_dir / "steptime" / fname
    try:
        m = getattr(importlib.import_module(mod), fn)(path)
    except (OSError, ValueError, KeyError) as exc:
        raise DataUnavailableError(f"{name} step model {path} cannot be read ({exc})") from None
    if m is None:
        raise DataUnavailableError(f"--step-model {name}: {path} not found (build it with the rule "
                                   "predict_step_grouped)")
    conf = m.params.get("conformal", {})
    q = float(conf["step_log_halfwidth"]) if abs(float(conf.get("coverage", -1)) - coverage) < 1e-9 else float("nan")
    how = f"split conformal on leave-one-GPU-out residuals ({conf.get('groups')} GPUs)"
    if conf.get("by_source"):
        parts = [f"{k} x/{math.exp(v['step_log_halfwidth']):.2f}" for k, v in sorted(conf["by_source"].items())]
        how += f", half-width of the data source of the nearest measured workload ({', '.join(parts)})"
    if conf.get("unseen_workload"):
        how += (f"; x/{math.exp(conf['unseen_workload']['step_log_halfwidth']):.2f} for a workload never measured "
                "(leave-one-model-out residuals)")
    notes = [f"step-time model (--step-model {name}): {m.label}; {m.params.get('rows')} rows ({path})",
             f"step interval: {how}" if q == q
             else f"step interval: none (calibrated at coverage {conf.get('coverage')}, asked {coverage})"]
    if "chronos_host" in (m.params.get("descriptors") or []):
        notes.append("step time as the consumer-GPU traces' host measures it; the CHRONOS release's cloud hosts add a "
                     "fixed cost per step (results/tables/predict_step_batch_scaling.md)")
    return m, q, notes
