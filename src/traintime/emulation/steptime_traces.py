"""Operator-roofline step-time model on the consumer-GPU traces: features and grouped evaluation.

Features of one (GPU, workload) row (:func:`roofline_features`)
    Terms: one per operator class of :mod:`traintime.measure.opgraph` (conv, matmul, attention,
    norm, other, optimizer; forward and backward pooled) with roofline time
    max(FLOPs / peak, bytes / bandwidth) in seconds, plus a ``launch`` term = operators x 1 us
    (a per-kernel floor). peak = fp32 peak for fp32 rows and for non-GEMM classes; the tensor peak
    (:func:`traintime.chronos.steptime.tensor_peak_gflops`) for conv / matmul / attention under
    fp16 / bf16. Bytes of non-optimizer classes are halved under fp16 / bf16 (activations in half
    precision; the walk itself runs in fp32, see :mod:`traintime.measure.opgraph`).
    Efficiency features z: log SMs, log boost clock, log bandwidth, log L2, log fp32 peak, fp16 and
    bf16 indicators, and per class log bytes per op and a smooth inverse-waves proxy
    1 / (1 + bytes_per_op / (SMs x 256 KiB)). No GPU name, generation or architecture enters z.

Protocols (:func:`evaluate`)
    ``logo``: leave one target GPU out; ``logen``: leave one generation (Ampere / Ada / Blackwell)
    out. ``host`` mode uses the RTX 5090 (configurable) as the host; the host GPU is never a test
    GPU in host mode; without a host every GPU is a test GPU. The model is fitted once per fold on
    every setting (all resolutions, batches, precisions) of the training GPUs and scored on slices.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.chronos.steptime import OperatorRooflineRegressor, tensor_peak_gflops
from traintime.core.errors import SchemaError
from traintime.emulation.schema import WORKLOAD_KEY

CLASSES: tuple[str, ...] = ("conv", "matmul", "attention", "norm", "other", "optimizer")
TERMS: tuple[str, ...] = (*CLASSES, "launch")
LAUNCH_S = 1e-6
WAVE_BYTES = 256 * 1024
TINY_S = 1e-12
GPU_Z: tuple[str, ...] = ("sms", "boost_clock_mhz", "memory_bandwidth_gbps", "l2_mb", "fp32_gflops")


def class_table(op_graphs: pd.DataFrame) -> pd.DataFrame:
    """Wide per-(model, img_px, batch_size) table: ``flops_<c>``, ``bytes_<c>``, ``n_<c>`` per class."""
    g = op_graphs.groupby(["model", "img_px", "batch_size", "op_class"], sort=True)[["flops", "bytes", "n_ops"]].sum()
    w = g.unstack("op_class", fill_value=0.0)
    w.columns = [f"{'n' if a == 'n_ops' else a}_{c}" for a, c in w.columns]
    for c in CLASSES:
        for a in ("flops", "bytes", "n"):
            if f"{a}_{c}" not in w:
                w[f"{a}_{c}"] = 0.0
    return w.reset_index()


def gpu_table(specs: pd.DataFrame, gpus: Sequence[str]) -> pd.DataFrame:
    """Spec columns used by the model, plus ``tensor_gflops``, one row per GPU."""
    s = specs.set_index("gpu")
    missing = [g for g in gpus if g not in s.index]
    if missing:
        raise SchemaError(f"no GPU spec row for {missing}")
    out = s.loc[list(gpus), ["architecture", *GPU_Z]].copy()
    out["tensor_gflops"] = [tensor_peak_gflops({**s.loc[g].to_dict(), "gpu": g}) for g in gpus]
    return out


def roofline_features(rows: pd.DataFrame, classes: pd.DataFrame, gpus: pd.DataFrame,
                      gpu_col: str = "gpu") -> np.ndarray:
    """Estimator block [log roofline time per term, z] for each row (module doc)."""
    d = rows[[*WORKLOAD_KEY, gpu_col]].merge(classes, on=["model", "img_px", "batch_size"], how="left")
    if d["n_other"].isna().any():
        bad = d.loc[d["n_other"].isna(), ["model", "img_px"]].drop_duplicates().head(3).to_dict("records")
        raise SchemaError(f"no op graph for workloads such as {bad}")
    g = gpus.loc[d[gpu_col]].reset_index(drop=True)
    half = d["precision"].isin(["fp16", "bf16"]).to_numpy()
    fp32 = g["fp32_gflops"].to_numpy() * 1e9
    tens = g["tensor_gflops"].to_numpy() * 1e9
    bw = g["memory_bandwidth_gbps"].to_numpy() * 1e9
    sms = g["sms"].to_numpy(dtype=float)
    logr, z = [], []
    n_all = np.zeros(len(d))
    for c in CLASSES:
        f = d[f"flops_{c}"].to_numpy(dtype=float)
        b = d[f"bytes_{c}"].to_numpy(dtype=float) * (np.where(half, 0.5, 1.0) if c != "optimizer" else 1.0)
        n = d[f"n_{c}"].to_numpy(dtype=float)
        n_all += n
        peak = np.where(half & (c in ("conv", "matmul", "attention")), tens, fp32)
        r = np.maximum(f / peak, b / bw)
        logr.append(np.log(np.maximum(r, TINY_S)))
        bpo = b / np.maximum(n, 1.0)
        z.append(np.log1p(bpo))
        z.append(1.0 / (1.0 + bpo / (sms * WAVE_BYTES)))
    logr.append(np.log(np.maximum(n_all * LAUNCH_S, TINY_S)))
    for c in GPU_Z:
        z.append(np.log(g[c].to_numpy(dtype=float)))
    z.append((d["precision"] == "fp16").to_numpy(dtype=float))
    z.append((d["precision"] == "bf16").to_numpy(dtype=float))
    return np.column_stack([*logr, *z])


def host_rows(traces: pd.DataFrame, host_gpu: str) -> pd.DataFrame:
    """Target rows (host excluded) joined with the host's latency of the same workload (``host_ms``)."""
    h = traces[traces["gpu"] == host_gpu][[*WORKLOAD_KEY, "latency_ms"]].rename(columns={"latency_ms": "host_ms"})
    return traces[traces["gpu"] != host_gpu].merge(h, on=list(WORKLOAD_KEY)).reset_index(drop=True)


def design(rows: pd.DataFrame, classes: pd.DataFrame, gpus: pd.DataFrame, host_gpu: str | None) -> np.ndarray:
    """Estimator matrix for ``rows``: target block, and in host mode the host block and log host ms."""
    X = roofline_features(rows, classes, gpus)
    if host_gpu is None:
        return X
    hr = rows.assign(host=host_gpu)
    Xh = roofline_features(hr, classes, gpus, gpu_col="host")
    return np.column_stack([X, Xh, np.log(rows["host_ms"].to_numpy(dtype=float))])


def folds(rows: pd.DataFrame, protocol: str, gpus: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    """(held-out group, test mask) per fold: one per GPU (``logo``) or architecture (``logen``)."""
    if protocol == "logo":
        keys = rows["gpu"]
    elif protocol == "logen":
        keys = rows["gpu"].map(gpus["architecture"])
    else:
        raise SchemaError(f"unknown trace protocol {protocol!r} (logo | logen)")
    return [(k, (keys == k).to_numpy()) for k in sorted(keys.unique())]


def evaluate(traces: pd.DataFrame, op_graphs: pd.DataFrame, specs: pd.DataFrame, protocol: str,
             host_gpu: str | None, alpha: float = 1e-3, previous_seeds: Sequence[int] = (),
             clip_z: bool = False) -> pd.DataFrame:
    """Out-of-fold predictions of the new model (``method='op_roofline'``) and, in host mode with
    ``previous_seeds``, of the previous learned baseline (``CrossGPURegressor``, one set per seed),
    on the same folds. Returns the test rows with ``method``, ``seed``, ``pred_ms``, ``fold`` and
    ``attrs['fit_s']`` (wall time of each new-model fit)."""
    from traintime.emulation.baselines import CrossGPURegressor, learned_features

    classes = class_table(op_graphs)
    have = set(map(tuple, classes[["model", "img_px"]].drop_duplicates().to_numpy()))
    data = traces[[(m, p) in have for m, p in zip(traces["model"], traces["img_px"])]]
    gpus = gpu_table(specs, sorted(set(data["gpu"]) | ({host_gpu} if host_gpu else set())))
    rows = host_rows(data, host_gpu) if host_gpu else data.reset_index(drop=True)
    X = design(rows, classes, gpus, host_gpu)
    y = rows["latency_ms"].to_numpy(dtype=float)
    Xp = learned_features(rows, specs) if (host_gpu and previous_seeds) else None
    out, fit_s = [], []
    for name, test in folds(rows, protocol, gpus):
        t0 = time.perf_counter()
        est = OperatorRooflineRegressor(n_terms=len(TERMS), alpha=alpha, host_mode=host_gpu is not None,
                                        clip_z=clip_z)
        est.fit(X[~test], y[~test])
        fit_s.append(time.perf_counter() - t0)
        part = rows[test].copy()
        out.append(part.assign(method="op_roofline", seed=-1, fold=name, pred_ms=est.predict(X[test])))
        for seed in previous_seeds if Xp is not None else ():
            prev = CrossGPURegressor(random_state=int(seed)).fit(Xp[~test], y[~test])
            out.append(part.assign(method="previous_xgb", seed=int(seed), fold=name, pred_ms=prev.predict(Xp[test])))
    res = pd.concat(out, ignore_index=True)
    res.attrs["fit_s"] = fit_s
    return res


def ape(df: pd.DataFrame) -> np.ndarray:
    """Absolute percentage error of each prediction row."""
    return 100.0 * np.abs(df["pred_ms"] - df["latency_ms"]) / df["latency_ms"]


def summarise(pred: pd.DataFrame, slice_name: str) -> pd.DataFrame:
    """MAPE per method: per seed, then mean / sd over seeds (sd empty for deterministic methods)."""
    p = pred.assign(ape=ape(pred))
    per_seed = p.groupby(["method", "seed"])["ape"].mean().reset_index()
    agg = per_seed.groupby("method")["ape"].agg(["mean", "std", "size"]).reset_index()
    agg.columns = ["method", "mape_mean", "mape_sd", "n_seeds"]
    agg["median_ape"] = [float(np.median(p.loc[p["method"] == m, "ape"])) for m in agg["method"]]
    agg["rows"] = [int((p["method"] == m).sum() / max(1, p.loc[p["method"] == m, "seed"].nunique()))
                   for m in agg["method"]]
    agg.insert(0, "slice", slice_name)
    return agg
