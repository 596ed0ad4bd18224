"""Does the run fit the GPU's memory? The estimate of :mod:`traintime.measure.memory` scored on the public
consumer-GPU traces' out-of-memory runs (rule ``predict_memory_fit``), and the usable fraction that
``traintime predict`` applies (``<models-dir>/memory/memory_fit.json``).

The traces ran 60 timm models at 64, 128 and 224 px, batches 16, 32 and 64, fp32 / fp16 / bf16 (SGD, 16 classes)
on 19 GPUs of 8 to 32 GB, and mark the runs that ran out of memory (``oom``). Each traced (model, input size) gets
the parameter count and saved-activation bytes of predict's static features (the same cached meta walk), each run
the estimate at its batch and precision; the card's memory is the trace's ``vram_gb``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError
from traintime.measure.memory import (
    fit_usable_fraction,
    leave_one_size_out,
    state_bytes,
    training_memory_gb,
)

#: file of the fitted usable fraction under ``--models-dir``
MODEL_FILE = "memory/memory_fit.json"
#: columns a traces table needs here
TRACE_COLUMNS = ("gpu", "model", "img_px", "batch_size", "precision", "oom", "vram_gb")


def trace_memory_runs(traces: pd.DataFrame) -> pd.DataFrame:
    """One row per traced run: ``gpu``, ``model``, ``img_px``, ``batch_size``, ``precision``, ``oom``,
    ``card_gb`` and the estimate ``memory_gb``; ``attrs['skipped']``: models predict cannot build (one line each)."""
    from traintime.core.errors import TraintimeError
    from traintime.predict_public_eval import (
        PRECISION,
        TRACE_NUM_CLASSES,
        TRACE_OPTIMIZER,
    )
    from traintime.predict_static import make_workload, static_features

    missing = [c for c in TRACE_COLUMNS if c not in traces.columns]
    if missing:
        raise SchemaError(f"traces table lacks column(s) {', '.join(missing)} (memory fit)")
    unknown = sorted(set(traces["precision"].astype(str)) - set(PRECISION))
    if unknown:
        raise SchemaError(f"traces table: unknown precision(s) {', '.join(unknown)} (known: {', '.join(PRECISION)})")
    runs = traces[list(TRACE_COLUMNS)].rename(columns={"vram_gb": "card_gb"}).copy()
    runs["oom"] = runs["oom"].astype(str).str.lower().isin(("true", "1"))
    per: dict[tuple[str, int], dict[str, Any]] = {}
    skipped: list[str] = []
    for model, px in runs[["model", "img_px"]].drop_duplicates().itertuples(index=False):
        try:
            w = make_workload(model, 16, "32", TRACE_OPTIMIZER, input_size=int(px), num_classes=TRACE_NUM_CLASSES)
            per[(model, int(px))] = static_features(w)
        except TraintimeError as exc:
            skipped.append(f"{model} {int(px)} px: {str(exc).splitlines()[0][:120]}")
    key = list(zip(runs["model"], runs["img_px"].astype(int)))
    state = np.array([state_bytes(per[k]) if k in per else np.nan for k in key], dtype=float)
    saved = np.array([per[k]["saved_bytes_per_sample"] if k in per else np.nan for k in key], dtype=float)
    prec = runs["precision"].astype(str).map(PRECISION).to_numpy()
    runs["memory_gb"] = training_memory_gb(state, saved, runs["batch_size"].to_numpy(float), prec)
    runs = runs[np.isfinite(runs["memory_gb"].to_numpy(float))].reset_index(drop=True)
    runs.attrs["skipped"] = skipped
    return runs


def memory_fit_eval(traces: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    """(leave-one-memory-size-out table of :func:`traintime.measure.memory.leave_one_size_out`, the frozen fit:
    the usable fraction fitted on every traced run, with what it was fitted on)."""
    runs = trace_memory_runs(traces)
    table = leave_one_size_out(runs)
    frozen = {"usable_fraction": fit_usable_fraction(runs["memory_gb"], runs["card_gb"], runs["oom"]),
              "fitted_on": "public consumer-GPU traces (gpu_profiler): out-of-memory labels",
              "runs": int(len(runs)), "oom_runs": int(np.sum(runs["oom"])), "gpus": int(runs["gpu"].nunique()),
              "card_gb": sorted(float(x) for x in runs["card_gb"].unique()),
              "skipped": runs.attrs.get("skipped", [])}
    return table, frozen


def load_usable_fraction(models_dir: str | Path) -> tuple[float, str]:
    """(usable fraction, a line saying where it comes from) of ``<models_dir>/memory/memory_fit.json``; NaN and
    the reason when the file is absent (predict then shows the estimate without a fit call)."""
    path = Path(models_dir) / MODEL_FILE
    if not path.is_file():
        return float("nan"), (f"memory: estimate only, no fit call ({path} absent: the rule predict_memory_fit "
                               "writes it)")
    doc = json.loads(path.read_text())
    u = float(doc["usable_fraction"])
    if not 0.0 < u <= 2.0:
        raise SchemaError(f"{path}: usable_fraction {u} outside (0, 2]")
    return u, (f"memory: the run is called to fit a GPU when the estimate (weights, gradients, optimizer state, "
               f"saved activations) is within {u:.0%} of its memory ({path}: fitted on {doc.get('runs')} traced "
               f"runs with out-of-memory labels)")
