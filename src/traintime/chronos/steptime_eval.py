"""Two-label step-time model on the CHRONOS release: compute time + loader wait, grouped evaluation.

Labels (canonical iteration table, :mod:`traintime.data.chronos`)
    ``compute_time_ms`` (release ``compute_ms``: synchronised forward + backward + optimizer step)
    and ``loader_wait_ms`` (release ``loader_wait_ms``: time blocked on the DataLoader, 2 workers).
    The release's step time is the mean over 20 timed iterations of (loader wait + compute) of each
    iteration, so the means add: **step = loader wait + compute** (:func:`~traintime.chronos.loader_wait.combine_labels`); on every
    released row the sum equals ``step_time_ms`` to rounding.

Compute model
    :class:`~traintime.chronos.steptime.OperatorRooflineRegressor` on the operator graphs of
    :mod:`traintime.measure.opgraph_chronos` (same terms and efficiency features as the traces,
    :func:`traintime.emulation.steptime_traces.roofline_features`; amp rows use the fp16 peak).
    One model over all three families.
Loader model
    :class:`~traintime.chronos.loader_wait.LoaderWaitRegressor` (host and data features only, never a GPU column).
Previous model
    The project's ``clean`` feature set + XGBoost per family (:mod:`traintime.chronos.evaluation`),
    fitted on each label in turn, same folds.
Rows: ``ok`` rows with an op graph (DistilBERT, a text model, has none: left out of both models).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.chronos.loader_wait import LoaderWaitRegressor, combine_labels
from traintime.chronos.steptime import OperatorRooflineRegressor
from traintime.core.errors import SchemaError
from traintime.measure.opgraph_chronos import CHRONOS_WALK_KEY, with_num_classes

LABELS: tuple[str, ...] = ("compute_time_ms", "loader_wait_ms", "step_time_ms")


def _key_string(model: object, px: object, nc: object, embed: object, opt: object) -> str:
    def num(v: object) -> str:
        return "-" if v is None or pd.isna(v) else str(int(float(v)))  # type: ignore[arg-type]
    return f"{model}|{num(px)}|{num(nc)}|{num(embed)}|{opt}"


def workload_id(rows: pd.DataFrame) -> pd.Series:
    """One string per CHRONOS walk key (the ``model`` of the op-graph class table)."""
    r = with_num_classes(rows) if "dataset" in rows else rows
    keys = [_key_string(*t) for t in zip(*(r[c] for c in CHRONOS_WALK_KEY))]
    return pd.Series(keys, index=rows.index)


def as_trace_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """CHRONOS rows in the shape :func:`roofline_features` reads (model = walk id, img_px, precision)."""
    return pd.DataFrame({"model": workload_id(rows).to_numpy(), "img_px": rows["input_px"].astype(int).to_numpy(),
                         "batch_size": rows["batch_size"].astype(int).to_numpy(),
                         "precision": np.where(rows["amp"].astype(bool), "fp16", "fp32"),
                         "gpu": rows["gpu"].to_numpy()})


def op_graph_as_trace(op_graphs: pd.DataFrame) -> pd.DataFrame:
    """CHRONOS op graphs keyed like the traces' (model = walk id, img_px)."""
    og = op_graphs.copy()
    og["model"] = workload_id(og).to_numpy()
    og["img_px"] = og["input_px"].astype(int)
    return og


def chronos_rows(table: pd.DataFrame, op_graphs: pd.DataFrame) -> pd.DataFrame:
    """``ok`` rows whose workload has an op graph, file order."""
    ok = table[(table["status"] == "ok")].copy()
    ok = ok[ok["input_px"].notna()]
    have = set(op_graph_as_trace(op_graphs)["model"])
    ok = ok[workload_id(ok).isin(have).to_numpy()]
    if ok.empty:
        raise SchemaError("no CHRONOS row has an op graph")
    return ok.sort_values(["family", "raw_row"]).reset_index(drop=True)


def evaluate_new(table: pd.DataFrame, op_graphs: pd.DataFrame, specs: pd.DataFrame, protocol: str,
                 seeds: Sequence[int], alpha: float = 1e-3, clip_z: bool = False) -> pd.DataFrame:
    """Out-of-fold predictions of the new two-label model: one row per (seed, test row) with
    ``pred_compute``, ``pred_loader``, ``pred_step``; ``attrs['fit_s']`` per compute fit."""
    from traintime.chronos.evaluation import PROTOCOLS
    from traintime.emulation.steptime_traces import (
        TERMS,
        class_table,
        gpu_table,
        roofline_features,
    )

    rows = chronos_rows(table, op_graphs)
    classes = class_table(op_graph_as_trace(op_graphs))
    gpus = gpu_table(specs, sorted(rows["gpu"].unique()))
    X = roofline_features(as_trace_rows(rows), classes, gpus)
    yc = rows["compute_time_ms"].to_numpy(dtype=float)
    yl = rows["loader_wait_ms"].to_numpy(dtype=float)
    groups = rows[PROTOCOLS[protocol].group_column].astype(str).to_numpy()
    out, fit_s = [], []
    for g in sorted(set(groups)):
        test = groups == g
        t0 = time.perf_counter()
        comp = OperatorRooflineRegressor(n_terms=len(TERMS), alpha=alpha, clip_z=clip_z).fit(X[~test], yc[~test])
        fit_s.append(time.perf_counter() - t0)
        pc = comp.predict(X[test])
        for seed in seeds:
            lw = LoaderWaitRegressor(random_state=int(seed)).fit(rows[~test], yl[~test])
            pl = lw.predict(rows[test])
            part = rows.loc[test, ["row_id", "family", "model", "dataset", "gpu", *LABELS]].copy()
            out.append(part.assign(method="two_label_roofline", seed=int(seed), fold=g, pred_compute=pc,
                                   pred_loader=pl, pred_step=combine_labels(pc, pl)))
    res = pd.concat(out, ignore_index=True)
    res.attrs["fit_s"] = fit_s
    return res


def evaluate_previous(table: pd.DataFrame, op_graphs: pd.DataFrame, protocol: str, seeds: Sequence[int],
                      label_seeds: Sequence[int] | None = None) -> pd.DataFrame:
    """The project's previous model (clean features + XGBoost per family) on each label, same rows
    and folds. ``label_seeds``: seeds for the compute and loader labels (default: ``seeds``)."""
    from traintime.chronos.evaluation import evaluate_family

    rows = chronos_rows(table, op_graphs)
    opts = {"log_target": True, "use_provider": False, "log_features": True}
    preds = {}
    for label in LABELS:
        s = seeds if label == "step_time_ms" or label_seeds is None else label_seeds
        t = rows.assign(step_time_ms=rows[label].clip(lower=1e-3)) if label != "step_time_ms" else rows
        parts = [evaluate_family(t, fam, protocol, ["clean"], ["xgboost"], s, clean_options=opts)
                 for fam in sorted(t["family"].unique())]
        preds[label] = pd.concat(parts, ignore_index=True)[["seed", "fold", "row_id", "y_pred_ms"]]
    base = rows[["row_id", "family", "model", "dataset", "gpu", *LABELS]]
    step = preds["step_time_ms"].rename(columns={"y_pred_ms": "pred_step"}).merge(base, on="row_id")
    for label, col in (("compute_time_ms", "pred_compute"), ("loader_wait_ms", "pred_loader")):
        p = preds[label].rename(columns={"y_pred_ms": col})
        first = p[p["seed"] == p["seed"].min()][["row_id", col]]
        step = step.merge(first, on="row_id", how="left")
    return step.assign(method="previous_xgb")


def summarise(pred: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """Per method and label: pooled MAPE and mean per-group MAPE (family x held-out group), mean/sd
    over seeds. Loader wait also as mean absolute error (ms): many waits are near zero, where MAPE
    explodes."""
    rows = []
    for (method, label, col) in [(m, lab, c) for m in sorted(pred["method"].unique())
                                 for lab, c in (("compute_time_ms", "pred_compute"),
                                                ("loader_wait_ms", "pred_loader"), ("step_time_ms", "pred_step"))]:
        p = pred[pred["method"] == method]
        pooled, grouped, mae = [], [], []
        for _, ps in p.groupby("seed"):
            y, yhat = ps[label].to_numpy(float), ps[col].to_numpy(float)
            ok = y > 0
            ape = 100 * np.abs(yhat[ok] - y[ok]) / y[ok]
            pooled.append(float(np.mean(ape)))
            pp = ps[ok].assign(ape=ape)
            grouped.append(float(pp.groupby(["family", "fold"])["ape"].mean().mean()))
            mae.append(float(np.mean(np.abs(yhat - y))))
        rows.append({"protocol": protocol, "method": method, "label": label,
                     "pooled_mape_mean": np.mean(pooled), "pooled_mape_sd": np.std(pooled, ddof=1) if len(pooled) > 1 else np.nan,
                     "group_mape_mean": np.mean(grouped), "group_mape_sd": np.std(grouped, ddof=1) if len(grouped) > 1 else np.nan,
                     "mae_ms": np.mean(mae), "n_seeds": len(pooled), "rows": int(len(p) / max(1, len(pooled)))})
    return pd.DataFrame(rows)
