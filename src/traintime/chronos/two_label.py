"""Step time as the release measured it, from two labels: ``predict``'s compute models + a loader-wait model, on the
release's grouped folds (rule ``predict_step_two_label``).

Labels
    The release's step time is loader wait + compute (:func:`traintime.chronos.loader_wait.combine_labels`).
Compute
    The out-of-fold compute-time predictions of :mod:`traintime.predict_step_grouped` on ``chronos LOGO`` /
    ``chronos LOMO`` / ``chronos LODO`` (methods :data:`COMPUTE_METHODS`; each fitted on folds that hold out the
    GPU, model or dataset; deterministic).
Loader wait
    :class:`traintime.chronos.loader_wait.LoaderWaitRegressor` fitted on the CHRONOS rows of the same outer training
    fold (never a GPU column), once per seed (its trees subsample rows).
Previous model
    The project's one-label model: XGBoost on the clean features fitted on ``step_time_ms`` directly, and the nested
    selection (rule ``chronos_iteration_evaluate``: same folds, per family, its own seeds).
Metrics
    Pooled MAPE and median APE over rows (as ``predict_step_grouped``; the iteration tables average per group),
    mean, sd and 95 % interval over seeds; the loader wait also as mean absolute error in ms (many waits are near 0,
    where a percentage explodes). Targets of issue 13 for the step time: :data:`TARGET_STEP_MAPE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from traintime.chronos.evaluation import PROTOCOLS as ITERATION_PROTOCOLS
from traintime.chronos.loader_wait import LoaderWaitRegressor, combine_labels
from traintime.core.errors import SchemaError
from traintime.core.metrics import mape, mean_sd_ci95, step_errors
from traintime.core.targets import target_status

#: CHRONOS protocols of predict_step_grouped -> the iteration protocol of the same folds
#: (:data:`traintime.chronos.evaluation.PROTOCOLS`, which holds their group columns: :func:`group_column`)
PROTOCOLS: dict[str, str] = {"chronos LOGO": "logo", "chronos LOMO": "lomo", "chronos LODO": "lodo"}
#: compute-time methods of predict_step_grouped combined with the loader model
COMPUTE_METHODS: tuple[str, ...] = ("neighbour", "efficiency", "roofline_calibrated")
#: the previous one-label models: (feature_set, estimator) of the iteration predictions -> method name
PREVIOUS: dict[tuple[str, str], str] = {("clean", "xgboost"): "previous: xgboost on step_time_ms",
                                        ("nested", "nested"): "previous: nested selection on step_time_ms"}
#: issue 13's step-time targets per protocol (MAPE %)
TARGET_STEP_MAPE: dict[str, float] = {"chronos LOGO": 25.0, "chronos LOMO": 40.0, "chronos LODO": 35.0}
ROW_COLUMNS: tuple[str, ...] = ("row_id", "gpu", "model", "dataset", "input_px", "batch_size", "dataset_size",
                                "provider", "compute_time_ms", "loader_wait_ms", "step_time_ms")


def group_column(protocol: str) -> str:
    """The column whose value one fold of a CHRONOS grouped protocol holds out (``gpu``, ``model``, ``dataset``)."""
    return str(ITERATION_PROTOCOLS[PROTOCOLS[protocol]].group_column)


def _rows(iteration: pd.DataFrame) -> pd.DataFrame:
    t = iteration[iteration["status"] == "ok"] if "status" in iteration.columns else iteration
    missing = [c for c in ROW_COLUMNS if c not in t.columns]
    if missing:
        raise SchemaError(f"iteration rows lack column(s) {', '.join(missing)}")
    return t[list(ROW_COLUMNS)].reset_index(drop=True)


def _rows_by_id(iteration: pd.DataFrame) -> pd.DataFrame:
    """:func:`_rows` indexed by ``row_id`` (as text): the measured side of the scores."""
    return _rows(iteration).assign(row_id=lambda d: d["row_id"].astype(str)).set_index("row_id")


def loader_predictions(rows: pd.DataFrame, by: str, seeds: Sequence[int]) -> dict[int, np.ndarray]:
    """Out-of-fold loader wait per seed: one :class:`LoaderWaitRegressor` per held-out ``by`` group and seed,
    fitted on every other row."""
    groups = rows[by].astype(str).to_numpy()
    y = rows["loader_wait_ms"].to_numpy(dtype=float)
    out = {int(s): np.full(len(rows), np.nan) for s in seeds}
    for g in sorted(set(groups)):
        test = groups == g
        for s in seeds:
            out[int(s)][test] = LoaderWaitRegressor(random_state=int(s)).fit(rows[~test], y[~test]).predict(rows[test])
    return out


def two_label_predictions(iteration: pd.DataFrame, compute: pd.DataFrame, seeds: Sequence[int]) -> pd.DataFrame:
    """Per protocol, compute method, seed and row: predicted compute, loader wait and step (their sum).
    ``compute``: predict_step_grouped's CHRONOS out-of-fold predictions (protocol, fold, method, row_id, pred_ms)."""
    rows = _rows(iteration)
    pos = pd.Series(np.arange(len(rows)), index=rows["row_id"].astype(str))
    out = []
    for proto in PROTOCOLS:
        c = compute[(compute["protocol"] == proto) & compute["method"].isin(COMPUTE_METHODS)]
        if c.empty:
            continue
        loader = loader_predictions(rows, group_column(proto), seeds)
        for method, g in c.groupby("method", sort=False):
            k = pos.reindex(g["row_id"].astype(str)).to_numpy()
            if np.isnan(k).any():
                raise SchemaError(f"{proto} {method}: {int(np.isnan(k).sum())} predicted rows are not in the "
                                  "iteration table (row_id)")
            k = k.astype(int)
            pc = np.maximum(g["pred_ms"].to_numpy(dtype=float), 0.0)
            for s, pl in loader.items():
                out.append(pd.DataFrame({"protocol": proto, "method": method, "seed": s,
                                         "row_id": rows["row_id"].to_numpy()[k], "pred_compute_ms": pc,
                                         "pred_loader_ms": pl[k], "pred_step_ms": combine_labels(pc, pl[k])}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def previous_predictions(iteration_predictions: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The previous one-label models' step-time predictions in the shape of :func:`two_label_predictions`
    (``iteration_predictions``: short protocol name -> rule chronos_iteration_merge's table)."""
    short = {v: k for k, v in PROTOCOLS.items()}
    out = []
    for name, p in iteration_predictions.items():
        for (fs, est), method in PREVIOUS.items():
            g = p[(p["feature_set"] == fs) & (p["estimator"] == est)]
            if len(g):
                out.append(pd.DataFrame({"protocol": short[name], "method": method, "seed": g["seed"].astype(int),
                                         "row_id": g["row_id"].astype(str), "pred_compute_ms": np.nan,
                                         "pred_loader_ms": np.nan, "pred_step_ms": g["y_pred_ms"].astype(float)}))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def meets(mean: float, low: float, high: float, target: float) -> str:
    """``yes`` when the 95 % interval over seeds lies at or below the target, ``no`` when above it, else
    ``inconclusive``; one seed (no interval): the mean decides."""
    if np.isnan(target):
        return ""
    return target_status(mean, low, high, upper=target)


def summarise(iteration: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """Per protocol and method: rows, compute MAPE, loader MAE (ms), step MAPE (mean, sd, 95 % interval over seeds)
    and median APE, the step target and whether it is met (:func:`meets`)."""
    rows = _rows_by_id(iteration)
    out = []
    for (proto, method), g in pred.groupby(["protocol", "method"], sort=False):
        per_seed = []
        for s, gs in g.groupby("seed"):
            truth = rows.loc[gs["row_id"].astype(str)]
            step = step_errors(truth["step_time_ms"], gs["pred_step_ms"])
            per_seed.append({"step": step["mape_pct"], "step_median": step["median_ape_pct"],
                             "compute": mape(truth["compute_time_ms"], gs["pred_compute_ms"]),
                             "loader_mae": float(np.mean(np.abs(gs["pred_loader_ms"].to_numpy()
                                                                - truth["loader_wait_ms"].to_numpy()))),
                             "n": len(gs)})
        ps = pd.DataFrame(per_seed)
        m, sd, lo, hi = mean_sd_ci95(ps["step"])
        target = TARGET_STEP_MAPE.get(proto, float("nan"))
        out.append({"protocol": proto, "method": method, "rows": int(ps["n"].iloc[0]), "n_seeds": len(ps),
                    "compute_mape_pct": ps["compute"].mean(), "loader_mae_ms": ps["loader_mae"].mean(),
                    "step_mape_pct_mean": m, "step_mape_pct_sd": sd, "step_mape_pct_ci95_low": lo,
                    "step_mape_pct_ci95_high": hi, "step_median_ape_pct": ps["step_median"].mean(),
                    "target_step_mape_pct": target, "meets_target": meets(m, lo, hi, target)})
    return pd.DataFrame(out)


def per_group(iteration: pd.DataFrame, pred: pd.DataFrame, protocol: str = "chronos LODO") -> pd.DataFrame:
    """Per held-out group of ``protocol`` (the dataset under LODO) and compute method of :data:`COMPUTE_METHODS`:
    rows, step MAPE (mean over seeds), compute MAPE, the step MAPE the same compute predictions would have with the
    *measured* loader wait (what a perfect loader model leaves), and the median measured and predicted loader wait
    (ms). Shows which held-out group the loader-wait model cannot know from the others."""
    columns = ["protocol", "method", "held_out", "rows", "n_seeds", "step_mape_pct", "compute_mape_pct",
               "step_mape_pct_measured_loader", "loader_wait_ms_measured_median", "loader_wait_ms_predicted_median"]
    if pred.empty:
        return pd.DataFrame(columns=columns)
    rows = _rows_by_id(iteration)
    by = group_column(protocol)
    sel = pred[(pred["protocol"] == protocol) & pred["method"].isin(COMPUTE_METHODS)]
    out = []
    for (method, group), g in sel.assign(_g=rows[by].astype(str).reindex(sel["row_id"].astype(str)).to_numpy()
                                         ).groupby(["method", "_g"], sort=True):
        per_seed = []
        for _, gs in g.groupby("seed"):
            truth = rows.loc[gs["row_id"].astype(str)]
            step_ms = truth["step_time_ms"].to_numpy(dtype=float)
            per_seed.append({
                "step": mape(step_ms, gs["pred_step_ms"]),
                "known": mape(step_ms, combine_labels(gs["pred_compute_ms"].to_numpy(dtype=float),
                                                      truth["loader_wait_ms"].to_numpy(dtype=float))),
                "compute": mape(truth["compute_time_ms"], gs["pred_compute_ms"]),
                "loader_meas": float(np.median(truth["loader_wait_ms"])),
                "loader_pred": float(np.median(gs["pred_loader_ms"])), "n": len(gs)})
        ps = pd.DataFrame(per_seed)
        out.append({"protocol": protocol, "method": method, "held_out": group, "rows": int(ps["n"].iloc[0]),
                    "n_seeds": len(ps), "step_mape_pct": ps["step"].mean(), "compute_mape_pct": ps["compute"].mean(),
                    "step_mape_pct_measured_loader": ps["known"].mean(),
                    "loader_wait_ms_measured_median": ps["loader_meas"].mean(),
                    "loader_wait_ms_predicted_median": ps["loader_pred"].mean()})
    return pd.DataFrame(out, columns=columns)
