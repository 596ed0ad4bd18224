"""``traintime predict`` against public measurements it never saw: the consumer-GPU training-step traces.

Data
    ``results/data/traces.csv`` (normalised from ``shared/data/gpu_profiler``): measured training-step
    latency (forward + backward + SGD step, synchronised, no data loader) of 60 timm models on 19 GeForce
    RTX GPUs (30-, 40- and 50-series) at 64 / 128 / 224 px, batch 16 / 32 / 64, fp32 / fp16 / bf16. These
    are public measurements; the roofline step-time models scored here are calibrated on the CHRONOS release
    only, so none of these rows was used in their training or selection. (``predict``'s default ``auto`` uses
    the neighbour model when it wins its rule; that model is trained on these traces, so its honest score on them
    is that of the grouped folds of :mod:`traintime.predict_step_grouped`, not this table.)
Subset (config ``predict_public_eval``; documented in the table's header)
    One input size (default 224 px, the ImageNet size users ask about), precisions (default fp32 and fp16)
    and batches (default 16 and 64); rows without out-of-memory and with a positive latency; every traced
    model that ``predict`` can resolve and build (the others are listed as skipped).
What is run
    Exactly the library path of ``traintime predict --no-probe`` for the compute step time:
    :func:`traintime.predict_static.make_workload` (``--input-size``, ``--num-classes 16`` as traced,
    SGD) and :func:`traintime.predict_static.step_rows` (static features through the on-disk cache of
    :mod:`traintime.predict_cache`), then each step model: ``roofline_calibrated`` (``predict --step-model
    roofline``: per-family constants fitted on CHRONOS compute times, the saved calibration) and
    ``roofline_assumed`` (``--step-model roofline-assumed``: assumed constants 0.40 / 0.60 / 5 us, no calibration).
Metrics (per step model)
    MAPE and median absolute percentage error of step time over rows; GPU-pair ordering: within each
    workload (model, batch, precision) every pair of GPUs whose measured times differ, counted right when
    the predicted times order them the same way; the fraction over all pairs of all workloads. Issue
    targets: MAPE <= 25 %, >= 90 % of pairs ordered right.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.metrics import step_errors

log = logging.getLogger(__name__)

#: number of classes and optimizer of the traced workloads (traintime.emulation.workload)
TRACE_NUM_CLASSES = 16
TRACE_OPTIMIZER = "sgd"
PRECISION = {"fp32": "32", "fp16": "16", "bf16": "bf16"}
LABEL = "public consumer-GPU traces (gpu_profiler), never used in training"
TARGET_MAPE = 25.0
TARGET_PAIRS = 90.0


def input_sizes(img_px: int | Sequence[int]) -> list[int]:
    """One input size or several (config ``img_px`` / ``step_img_px``) as a sorted list of distinct ints."""
    return sorted({int(img_px)} if isinstance(img_px, (int, np.integer)) else {int(px) for px in img_px})


def trace_subset(traces: pd.DataFrame, img_px: int | Sequence[int] = 224, precisions: Sequence[str] = ("fp32", "fp16"),
                 batch_sizes: Sequence[int] = (16, 64), models: Sequence[str] | None = None) -> pd.DataFrame:
    """Measured rows of the documented subset (module doc); ``img_px``: one input size or several."""
    t = traces[traces["img_px"].isin(input_sizes(img_px)) & traces["precision"].isin(list(precisions))
               & traces["batch_size"].isin([int(b) for b in batch_sizes])]
    if "oom" in t.columns:
        t = t[~t["oom"].fillna(False).astype(bool)]
    t = t[pd.to_numeric(t["latency_ms"], errors="coerce").gt(0)]
    if models:
        t = t[t["model"].isin(list(models))]
    return t.reset_index(drop=True)


def step_models(calibration: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """{method: {family: step model}} of the methods compared (module doc)."""
    from traintime.chronos.roofline_frozen import (
        FrozenRoofline,
        frozen_from_calibration,
    )

    assumed = FrozenRoofline(0.40, 0.60, 5.0, fitted=False)
    fams = ("CNN", "MLP", "Transformer")
    out: dict[str, dict[str, Any]] = {"roofline_assumed": {f: assumed for f in fams}}
    if calibration is not None:
        out["roofline_calibrated"] = {f: m for f in fams if (m := frozen_from_calibration(calibration, f)) is not None}
    return out


def trace_workloads(subset: pd.DataFrame, gpus: pd.DataFrame, skipped: list[str]) -> Iterator[tuple[Any, ...]]:
    """Per traced workload (model, input size, batch, precision): (its measured rows, predict's
    :class:`~traintime.predict_static.Workload`, predict's step rows on those rows' GPUs). A model predict
    cannot build is appended to ``skipped`` (one line) and left out."""
    from traintime.core.errors import TraintimeError
    from traintime.predict_static import make_workload, step_rows

    spec = gpus.drop_duplicates("gpu").set_index("gpu")
    for (model, px, batch, prec), g in subset.groupby(["model", "img_px", "batch_size", "precision"], sort=True):
        try:
            w = make_workload(model, int(batch), PRECISION[prec], TRACE_OPTIMIZER, input_size=int(px),
                              num_classes=TRACE_NUM_CLASSES)
            rows = step_rows(w, spec.loc[g["gpu"]].reset_index())
        except TraintimeError as exc:
            skipped.append(f"{model}: {str(exc).splitlines()[0][:120]}")
            continue
        yield g, w, rows


def predict_subset(subset: pd.DataFrame, gpus: pd.DataFrame, models: dict[str, dict[str, Any]],
                   only: dict[str, set[str]] | None = None) -> pd.DataFrame:
    """One row per (measured row, method) with ``pred_ms``; ``attrs['skipped']``: models predict cannot build.
    ``only``: method -> the traced models it is run on (others: every model)."""
    out: list[pd.DataFrame] = []
    skipped: list[str] = []
    for g, w, rows in trace_workloads(subset, gpus, skipped):
        model = g["model"].iloc[0]
        for method, per_family in models.items():
            m = per_family.get(w.family)
            if m is None or (only and method in only and model not in only[method]):
                continue
            part = g[["gpu", "model", "img_px", "batch_size", "precision", "latency_ms"]].copy()
            part["family_predict"] = w.family
            part["method"] = method
            part["pred_ms"] = np.asarray(m.predict(rows), dtype=float)
            out.append(part)
    res = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    res.attrs["skipped"] = sorted(set(skipped))
    return res


def pair_order(pred: pd.DataFrame, keys: Sequence[str] = ("model", "img_px", "batch_size", "precision"),
               measured: str = "latency_ms", predicted: str = "pred_ms") -> tuple[int, int]:
    """(pairs ordered right, pairs) over the GPU pairs of every ``keys`` group (a workload) whose ``measured``
    values differ; a pair is right when ``predicted`` orders it the same way (a predicted tie is wrong)."""
    right = total = 0
    for _, g in pred.groupby(list(keys), sort=False):
        y, p = g[measured].to_numpy(float), g[predicted].to_numpy(float)
        i, j = np.triu_indices(len(y), k=1)
        dy, dp = np.sign(y[i] - y[j]), np.sign(p[i] - p[j])
        ok = dy != 0
        right += int((dy[ok] == dp[ok]).sum())
        total += int(ok.sum())
    return right, total


def summarise(pred: pd.DataFrame, subset_models: Sequence[str] = ()) -> pd.DataFrame:
    """Per method and slice (all rows, per precision, batch and family; with ``subset_models``, also the rows
    of those models, where every method can be compared with the operator model): the metrics of the module doc."""
    rows = []
    for method, m in pred.groupby("method", sort=True):
        extra = [("operator-model subset", m[m["model"].isin(list(subset_models))])] if subset_models else []
        for name, s in [*extra, ("all", m), *[(f"{p}", x) for p, x in m.groupby("precision", sort=True)],
                        *[(f"batch {b}", x) for b, x in m.groupby("batch_size", sort=True)],
                        *[(f"{f} (predict family)", x) for f, x in m.groupby("family_predict", sort=True)]]:
            s = s[np.isfinite(s["pred_ms"])]
            if s.empty:
                continue
            err = step_errors(s["latency_ms"], s["pred_ms"])
            right, total = pair_order(s)
            rows.append({"method": method, "slice": name, "rows": len(s), "workloads": int(
                s.groupby(["model", "batch_size", "precision"]).ngroups), "models": s["model"].nunique(),
                "gpus": s["gpu"].nunique(), "mape_pct": err["mape_pct"], "median_ape_pct": err["median_ape_pct"],
                "pairs": total, "pairs_right_pct": 100.0 * right / total if total else float("nan"),
                "geo_mean_pred_over_measured": err["geo_mean_pred_over_measured"],
                "target_mape_pct": TARGET_MAPE, "target_pairs_right_pct": TARGET_PAIRS,
                "mape_target_met": bool(err["mape_pct"] <= TARGET_MAPE),
                "pairs_target_met": bool(total and 100.0 * right / total >= TARGET_PAIRS)})
    return pd.DataFrame(rows)


def public_eval(traces: pd.DataFrame, calibration: dict[str, Any] | None, specs_path: str | None = None,
                img_px: int = 224, precisions: Sequence[str] = ("fp32", "fp16"),
                batch_sizes: Sequence[int] = (16, 64), models: Sequence[str] | None = None,
                operator: Any = None, operator_models: Sequence[str] = ()) -> tuple[pd.DataFrame, str]:
    """(summary table, markdown) of ``predict`` on the public trace subset (module doc). ``operator``: a
    :class:`traintime.predict_operator.OperatorStepModel` run on the traced ``operator_models`` only (its
    op walks cost seconds per model)."""
    from traintime.core.gpudb import gpu_database

    subset = trace_subset(traces, img_px, precisions, batch_sizes, models)
    methods = step_models(calibration)
    only = None
    if operator is not None:
        methods["operator"] = {f: operator for f in ("CNN", "MLP", "Transformer")}
        only = {"operator": set(operator_models)}
    pred = predict_subset(subset, gpu_database(specs_path), methods, only)
    table = summarise(pred, list(operator_models) if operator is not None else ())
    md = markdown(table, pred.attrs.get("skipped", []), img_px, precisions, batch_sizes)
    return table, md


def markdown(table: pd.DataFrame, skipped: list[str], img_px: int, precisions: Sequence[str],
             batch_sizes: Sequence[int]) -> str:
    lines = [f"# `traintime predict` on {LABEL}", "",
             f"Subset: {img_px} px, precisions {', '.join(precisions)}, batches {', '.join(map(str, batch_sizes))}, "
             f"rows without OOM; {TRACE_NUM_CLASSES} classes and SGD as traced. Compute step time of "
             "`predict --no-probe` (library path) against the measured training-step latency. "
             f"Targets: MAPE <= {TARGET_MAPE:g} %, >= {TARGET_PAIRS:g} % of GPU pairs ordered right "
             "(pairs within each model x batch x precision). `roofline_calibrated` is `predict --step-model "
             "roofline` (constants fitted on CHRONOS compute times), `roofline_assumed` `--step-model "
             "roofline-assumed` (the default `auto` uses the neighbour model, trained on these traces: its honest "
             "score on them is in results/tables/predict_step_grouped.md), `operator` "
             "(when the CHRONOS op graphs exist) the operator-level roofline fitted on CHRONOS compute times, run on "
             "the `operator-model subset` of models only (compare the methods on that slice). "
             "Its wall time is in results/tables/dag_cost.csv (tables stay byte-identical between runs).", "",
             "| method | slice | rows | models | GPUs | MAPE % | median APE % | pairs right % | pred / measured (geo mean) | targets met (MAPE, pairs) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for _, r in table.iterrows():
        lines.append(f"| {r['method']} | {r['slice']} | {r['rows']} | {r['models']} | {r['gpus']} | "
                     f"{r['mape_pct']:.1f} | {r['median_ape_pct']:.1f} | {r['pairs_right_pct']:.1f} | "
                     f"{r['geo_mean_pred_over_measured']:.2f} | {'yes' if r['mape_target_met'] else 'no'}, "
                     f"{'yes' if r['pairs_target_met'] else 'no'} |")
    if skipped:
        lines += ["", f"Models predict could not build ({len(skipped)}): " + "; ".join(skipped)]
    return "\n".join(lines) + "\n"


def step_model_selection(iteration: pd.DataFrame, specs: pd.DataFrame,
                         op_graphs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Grouped choice of predict's default step model on the CHRONOS release (never on the traces):
    compute-time MAPE per family under leave-one-GPU-out, outer folds only. ``roofline_calibrated`` is refitted
    without the held-out GPU (:func:`traintime.chronos.roofline_calibration.logo_step_predictions`);
    ``roofline_assumed`` has nothing to fit (its error on every row is its out-of-fold error); ``operator``
    (with ``op_graphs``) is refitted without the held-out GPU
    (:func:`traintime.predict_operator.operator_logo`). All are deterministic (no seed). With op graphs, the
    models are compared on the rows that have one (``rows_subset`` = ``with op graph``; DistilBERT, a text
    model, has none); the roofline is also reported on all rows."""
    from traintime.chronos.roofline_calibration import (
        iteration_step_rows,
        logo_step_predictions,
    )
    from traintime.chronos.roofline_frozen import FrozenRoofline
    from traintime.core.metrics import mape

    rows = iteration_step_rows(iteration, specs)
    op = None
    if op_graphs is not None:
        from traintime.predict_operator import operator_logo

        op = operator_logo(iteration, op_graphs, specs).set_index("row_id")["pred_ms"]
    out = []
    for fam in sorted(rows["family"].unique()):
        r = rows[rows["family"] == fam]
        if r["gpu"].nunique() < 3:
            continue
        y = r["measured_ms"].to_numpy(dtype=float)
        preds = {"roofline_calibrated": logo_step_predictions(r),
                 "roofline_assumed": FrozenRoofline(0.40, 0.60, 5.0, fitted=False).predict(r)}
        subsets = [("all rows", np.ones(len(r), dtype=bool))]
        if op is not None:
            subsets.append(("with op graph", r["row_id"].isin(op.index).to_numpy()))
        for name, keep in subsets:
            methods = dict(preds)
            if name == "with op graph":
                methods["operator"] = op.reindex(r["row_id"]).to_numpy(dtype=float)
            for method, p in methods.items():
                if not keep.any():
                    continue
                out.append({"protocol": "logo (CHRONOS, outer folds)", "family": fam, "rows_subset": name,
                            "method": method, "rows": int(keep.sum()), "gpus": r.loc[keep, "gpu"].nunique(),
                            "against": rows.attrs.get("measured", ""), "mape_pct": mape(y[keep], p[keep])})
    table = pd.DataFrame(out)
    # the choice is made on the widest comparison: rows with an op graph when the operator model takes part
    basis = table[table["rows_subset"] == ("with op graph" if op is not None else "all rows")]
    best = basis.loc[basis.groupby("family")["mape_pct"].idxmin(), ["family", "method"]]
    chosen = dict(zip(best["family"], best["method"]))
    table["chosen"] = [(s == basis["rows_subset"].iloc[0]) and chosen.get(f) == m
                       for f, m, s in zip(table["family"], table["method"], table["rows_subset"])]
    return table
