"""Grouped evaluation of ``predict``'s step-time models on both data sources (rule ``predict_step_grouped``).

Data (compute time: forward + backward + optimizer, no DataLoader wait, on both sources)
    ``traces``: the public consumer-GPU traces in the subset of :mod:`traintime.predict_public_eval` (19 RTX GPUs,
    60 timm models, 224 px, fp32 + fp16, batch 16 + 64), with the static features of ``predict --no-probe``;
    ``chronos``: the release's ``compute_time_ms`` rows (:func:`traintime.chronos.roofline_calibration.iteration_step_rows`).
Protocols (outer folds only; nothing is chosen on a held-out fold; every fit is deterministic, so no seeds)
    ``traces LOGO`` (leave one GPU out), ``traces LOMO`` (leave one model out: the model is also removed from
    CHRONOS when it has the same name), ``traces LOGenO`` (leave one generation out: Ampere / Ada / Blackwell from
    the RTX series number), ``chronos LOGO`` (leave one CHRONOS GPU out; the same name is removed from the traces
    too), and ``traces external`` (fitted on CHRONOS only, scored on every trace row: the traces never seen).
Methods
    ``efficiency`` (:class:`traintime.chronos.efficiency_step.EfficiencyStepTime`, one model fitted on the
    training part of both sources, each source weighted equally), ``efficiency_chronos_only`` (the same fitted on
    the CHRONOS part of the training fold only), ``roofline_calibrated`` (predict's current default: per-family
    constants fitted on CHRONOS; on CHRONOS LOGO refitted without the held-out GPU; on the trace protocols the
    saved calibration, which never saw a trace) and ``roofline_assumed`` (constants 0.40 / 0.60 / 5 us, nothing fitted).
Metrics
    MAPE and median APE over the out-of-fold rows; GPU pairs ordered right within each workload
    (:func:`traintime.predict_public_eval.pair_order`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from traintime.predict_public_eval import PRECISION, TRACE_NUM_CLASSES, TRACE_OPTIMIZER, pair_order

GENERATIONS = {"3": "Ampere", "4": "Ada", "5": "Blackwell"}
KEY = ["model", "img_px", "batch_size", "precision"]


def generation(gpu: str) -> str:
    """Ampere / Ada / Blackwell of an RTX 30 / 40 / 50 card ('other' when the name has no such number)."""
    m = re.search(r"RTX\s*([345])0\d0", str(gpu), flags=re.I)
    return GENERATIONS[m.group(1)] if m else "other"


def trace_step_rows(subset: pd.DataFrame, gpus: pd.DataFrame) -> pd.DataFrame:
    """Step rows (predict's static features) of the measured trace rows, with ``measured_ms``; attrs['skipped']."""
    from traintime.core.errors import TraintimeError
    from traintime.predict_static import make_workload, step_rows

    spec = gpus.drop_duplicates("gpu").set_index("gpu")
    out, skipped = [], []
    for (model, px, batch, prec), g in subset.groupby(KEY, sort=True):
        try:
            w = make_workload(model, int(batch), PRECISION[prec], TRACE_OPTIMIZER, input_size=int(px),
                              num_classes=TRACE_NUM_CLASSES)
            rows = step_rows(w, spec.loc[g["gpu"]].reset_index())
        except TraintimeError as exc:
            skipped.append(f"{model}: {str(exc).splitlines()[0][:120]}")
            continue
        rows["measured_ms"] = g["latency_ms"].to_numpy(dtype=float)
        rows["trace_precision"] = prec
        out.append(rows)
    res = pd.concat(out, ignore_index=True) if out else pd.DataFrame()
    res.attrs["skipped"] = sorted(set(skipped))
    return res


def both_sources(trace_rows: pd.DataFrame, chronos_rows: pd.DataFrame) -> pd.DataFrame:
    """One frame of step rows with ``source``, ``img_px`` and ``generation`` (the pooled training data)."""
    t = trace_rows.assign(source="traces")
    c = chronos_rows.assign(source="chronos")
    cols = ["source", "model", "family", "input_px", "batch_size", "precision", "gpu", "flops_train_per_batch",
            "param_bytes", "grad_bytes", "optimizer_state_bytes", "act_bytes_per_sample", "layers",
            "fp32_gflops", "fp16_gflops", "memory_bandwidth_gbps", "measured_ms"]
    d = pd.concat([t[cols], c[cols]], ignore_index=True)
    d["img_px"] = d["input_px"]
    d["generation"] = [generation(g) if s == "traces" else "cloud" for g, s in zip(d["gpu"], d["source"])]
    return d


def protocols(data: pd.DataFrame) -> list[tuple[str, str, list[tuple[str, np.ndarray, np.ndarray]]]]:
    """(protocol, scored source, folds [(held-out group, train mask, test mask)]) of the module doc."""
    tr = (data["source"] == "traces").to_numpy()
    ch = ~tr
    gpu, model, gen = data["gpu"].astype(str).to_numpy(), data["model"].astype(str).to_numpy(), data["generation"].to_numpy()
    out = []
    for name, col, src in [("traces LOGO", gpu, tr), ("traces LOMO", model, tr), ("traces LOGenO", gen, tr),
                           ("chronos LOGO", gpu, ch)]:
        folds = [(str(g), col != g, src & (col == g)) for g in sorted(np.unique(col[src]))]
        out.append((name, "traces" if src is tr else "chronos", folds))
    out.append(("traces external (fit on CHRONOS only)", "traces", [("all traces", ch, tr)]))
    return out


def _calibrated(calibration: dict[str, Any] | None, rows: pd.DataFrame) -> np.ndarray:
    from traintime.chronos.roofline_frozen import frozen_from_calibration

    p = np.full(len(rows), np.nan)
    for fam, idx in rows.groupby("family").indices.items():
        m = frozen_from_calibration(calibration or {}, fam)
        if m is not None:
            p[idx] = m.predict(rows.iloc[idx])
    return p


def grouped_predictions(data: pd.DataFrame, calibration: dict[str, Any] | None,
                        factory: Callable[[], Any] | None = None) -> pd.DataFrame:
    """Out-of-fold predictions of every method and protocol (module doc); ``factory`` builds the efficiency
    model (default ``EfficiencyStepTime()``; tests pass a spy). Columns: protocol, fold, method, row, pred_ms."""
    from traintime.chronos.efficiency_step import EfficiencyStepTime, source_weights
    from traintime.chronos.roofline_calibration import logo_step_predictions
    from traintime.chronos.roofline_frozen import FrozenRoofline

    make = factory or EfficiencyStepTime
    y = data["measured_ms"].to_numpy(dtype=float)
    src = data["source"].to_numpy()
    assumed = FrozenRoofline(0.40, 0.60, 5.0, fitted=False).predict(data)
    chronos_logo = np.full(len(data), np.nan)
    for fam, idx in data.index[src == "chronos"].groupby(data.loc[src == "chronos", "family"]).items():
        r = data.loc[idx].copy()
        if r["gpu"].nunique() >= 3:
            chronos_logo[data.index.get_indexer(idx)] = logo_step_predictions(r)
    calibrated = _calibrated(calibration, data)
    out = []
    for proto, _, folds in protocols(data):
        external = proto.startswith("traces external")
        for group, train, test in folds:
            idx = np.flatnonzero(test)
            methods: dict[str, np.ndarray] = {}
            only_ch = train & (src == "chronos")
            if not external:
                methods["efficiency"] = make().fit(data[train], y[train], sample_weight=source_weights(src[train])).predict(data.iloc[idx])
            methods["efficiency_chronos_only"] = make().fit(data[only_ch], y[only_ch]).predict(data.iloc[idx])
            methods["roofline_calibrated"] = chronos_logo[idx] if proto == "chronos LOGO" else calibrated[idx]
            methods["roofline_assumed"] = assumed[idx]
            for method, p in methods.items():
                out.append(pd.DataFrame({"protocol": proto, "fold": group, "method": method, "row": idx,
                                         "pred_ms": np.asarray(p, dtype=float)}))
    return pd.concat(out, ignore_index=True)


def summarise_grouped(data: pd.DataFrame, pred: pd.DataFrame) -> pd.DataFrame:
    """Per protocol and method: rows, folds, MAPE, median APE, GPU pairs ordered right (module doc)."""
    rows = []
    for (proto, method), g in pred.groupby(["protocol", "method"], sort=False):
        d = data.iloc[g["row"].to_numpy()][KEY + ["gpu"]].copy()
        d["latency_ms"] = data["measured_ms"].to_numpy()[g["row"].to_numpy()]
        d["pred_ms"] = g["pred_ms"].to_numpy()
        d = d[np.isfinite(d["pred_ms"])]
        ape = 100 * np.abs(d["pred_ms"] / d["latency_ms"] - 1)
        right, total = pair_order(d)
        rows.append({"protocol": proto, "method": method, "rows": len(d), "folds": g["fold"].nunique(),
                     "gpus": d["gpu"].nunique(), "models": d["model"].nunique(), "mape_pct": float(ape.mean()),
                     "median_ape_pct": float(ape.median()),
                     "pairs_right_pct": 100.0 * right / total if total else float("nan"),
                     "geo_mean_pred_over_measured": float(np.exp(np.mean(np.log(d["pred_ms"] / d["latency_ms"]))))})
    return pd.DataFrame(rows)


def step_grouped_eval(trace_rows: pd.DataFrame, chronos_rows: pd.DataFrame, calibration: dict[str, Any] | None,
                      factory: Callable[[], Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """(summary, out-of-fold predictions, wall seconds) of the module doc."""
    t0 = time.perf_counter()
    data = both_sources(trace_rows, chronos_rows)
    pred = grouped_predictions(data, calibration, factory)
    return summarise_grouped(data, pred), pred, time.perf_counter() - t0


def wins(summary: pd.DataFrame, new: str = "efficiency", old: str = "roofline_calibrated") -> bool:
    """True when ``new`` has a lower MAPE than ``old`` on every grouped protocol of both sources."""
    s = summary[~summary["protocol"].str.startswith("traces external")].pivot(index="protocol", columns="method",
                                                                             values="mape_pct")
    return bool(len(s) and (s[new] < s[old]).all())
