"""``traintime predict --step-model operator``: the operator-level roofline of
:class:`~traintime.chronos.steptime.OperatorRooflineRegressor` as a step-time model of ``predict``.

Fit
    On every CHRONOS row with an operator graph (``<data_dir>/iteration.csv`` and
    ``<data_dir>/op_graphs_chronos.csv``, rule steptime_op_graphs), label ``compute_time_ms``, the features
    of :func:`traintime.emulation.steptime_traces.roofline_features` (as in
    :mod:`traintime.chronos.steptime_eval`), ridge ``alpha`` 1e-3 as configured for the steptime stage.
    Fitted when asked (a few seconds); deterministic.
Predict
    The requested workload is walked on the meta device at batch 2 and 3
    (:func:`traintime.measure.opgraph_chronos.chronos_step`: the model of ``predict``, its classes and optimizer)
    and extrapolated exactly to the run's batch (:func:`traintime.measure.opgraph.extrapolate`); the two walks
    are kept in the on-disk cache of :mod:`traintime.predict_cache`, so a repeat call does not walk again.
    GPUs lacking a spec the efficiency needs (SMs, boost clock, L2, tensor cores) get NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import DataUnavailableError, TraintimeError

ALPHA = 1e-3


def _operator_rows(iteration: pd.DataFrame, op_graphs: pd.DataFrame, specs: pd.DataFrame) -> tuple[Any, Any, int]:
    """(CHRONOS rows with an op graph, their operator roofline features, number of terms)."""
    from traintime.chronos.steptime_eval import (
        as_trace_rows,
        chronos_rows,
        op_graph_as_trace,
    )
    from traintime.emulation.steptime_traces import (
        TERMS,
        class_table,
        gpu_table,
        roofline_features,
    )

    rows = chronos_rows(iteration, op_graphs)
    X = roofline_features(as_trace_rows(rows), class_table(op_graph_as_trace(op_graphs)),
                          gpu_table(specs, sorted(rows["gpu"].unique())))
    return rows, X, len(TERMS)


def fit_operator_model(iteration: pd.DataFrame, op_graphs: pd.DataFrame, specs: pd.DataFrame,
                       alpha: float = ALPHA) -> Any:
    """OperatorRooflineRegressor fitted on every CHRONOS row with an op graph (module doc)."""
    from traintime.chronos.steptime import OperatorRooflineRegressor

    rows, X, n_terms = _operator_rows(iteration, op_graphs, specs)
    reg = OperatorRooflineRegressor(n_terms=n_terms, alpha=alpha).fit(X, rows["compute_time_ms"].to_numpy(float))
    reg.rows_ = len(rows)
    return reg


def operator_logo(iteration: pd.DataFrame, op_graphs: pd.DataFrame, specs: pd.DataFrame,
                  alpha: float = ALPHA) -> pd.DataFrame:
    """Leave-one-GPU-out compute-time predictions of the operator model (refitted without each GPU): the
    rows of :func:`traintime.chronos.steptime_eval.chronos_rows` with ``pred_ms``."""
    from traintime.chronos.steptime import OperatorRooflineRegressor

    rows, X, n_terms = _operator_rows(iteration, op_graphs, specs)
    y = rows["compute_time_ms"].to_numpy(float)
    pred = np.full(len(rows), np.nan)
    for g in sorted(rows["gpu"].unique()):
        test = (rows["gpu"] == g).to_numpy()
        pred[test] = OperatorRooflineRegressor(n_terms=n_terms, alpha=alpha).fit(X[~test], y[~test]).predict(X[test])
    return rows.assign(pred_ms=pred)


def _walks(model: str, px: int, num_classes: int, optimizer: str) -> dict[str, Any]:
    """Op-graph summaries at batch 2 and 3 (cached on disk; module doc)."""
    from traintime.predict_cache import cached

    def build() -> dict[str, Any]:
        from traintime.measure.opgraph_chronos import chronos_step

        return {str(b): chronos_step(model, px, b, num_classes, None, optimizer).to_dict(orient="list")
                for b in (2, 3)}

    parts = {"model": model, "input_px": int(px), "num_classes": int(num_classes), "optimizer": optimizer}
    return cached("opwalk", parts, build)


class OperatorStepModel:
    """Step model of ``predict`` around a fitted OperatorRooflineRegressor (module doc)."""

    name = "operator"

    def __init__(self, regressor: Any, specs: pd.DataFrame, source: str = "") -> None:
        self.regressor = regressor
        self.specs = specs
        self.source = source

    @property
    def label(self) -> str:
        return (f"operator roofline x learned efficiency (OperatorRooflineRegressor, alpha {self.regressor.alpha:g}), "
                f"fitted on {getattr(self.regressor, 'rows_', '?')} CHRONOS compute times{self.source}")

    def predict(self, rows: pd.DataFrame) -> np.ndarray:
        from traintime.emulation.steptime_traces import (
            class_table,
            gpu_table,
            roofline_features,
        )
        from traintime.measure.opgraph import extrapolate

        out = np.full(len(rows), np.nan)
        keys = ["model", "input_px", "num_classes", "optimizer", "batch_size", "precision"]
        for key, g in rows.groupby(keys, sort=False):
            model, px, k, opt, b, prec = key
            try:
                w = _walks(str(model), int(px), int(k), str(opt))
            except TraintimeError:
                raise
            except Exception as exc:  # a model the meta-device walk cannot run
                raise TraintimeError(f"--step-model operator: cannot walk {model} at {px} px ({exc})") from None
            og = extrapolate(pd.DataFrame(w["2"]), pd.DataFrame(w["3"]), [int(b)])
            og.insert(0, "img_px", int(px))
            og.insert(0, "model", "request")
            classes = class_table(og)
            spec = self.specs.drop_duplicates("gpu")
            usable = spec.dropna(subset=["sms", "boost_clock_mhz", "memory_bandwidth_gbps", "l2_mb", "fp32_gflops",
                                         "tensor_cores"])
            ok = g["gpu"].isin(set(usable["gpu"])).to_numpy()
            if not ok.any():
                continue
            sub = g[ok]
            tr = pd.DataFrame({"model": "request", "img_px": int(px), "batch_size": int(b),
                               "precision": {"32": "fp32", "16": "fp16"}.get(str(prec), str(prec)),
                               "gpu": sub["gpu"].to_numpy()})
            X = roofline_features(tr, classes, gpu_table(usable, sorted(set(sub["gpu"]))))
            idx = np.flatnonzero(rows.index.isin(sub.index))
            out[idx] = self.regressor.predict(X)
        return out


def operator_step_model(data_dir: Any, specs: pd.DataFrame) -> OperatorStepModel:
    """Fit the operator model from ``<data_dir>`` (module doc); a missing table stops with one line."""
    from pathlib import Path

    from traintime.core.io import read_csv

    d = Path(data_dir)
    it, og = d / "iteration.csv", d / "op_graphs_chronos.csv"
    for p in (it, og):
        if not p.exists():
            raise DataUnavailableError(f"--step-model operator needs {p} (rules iteration / steptime_op_graphs)")
    reg = fit_operator_model(read_csv(it, low_memory=False), read_csv(og), specs)
    return OperatorStepModel(reg, specs, f" ({it}, {og}; fitted now)")
