"""Training rows of the saved predictors: the released rows plus every merged local row.

``config.yaml: collect.train_on`` chooses what the saved models learn from:

* ``released_and_local`` (default): the released table plus every row of the merged local table
  (``results/data/local_iteration.csv`` / ``local_convergence.csv``, rules ``collect_merge_*``);
* ``released_only``: the released table alone (the CHRONOS reproduction as published).

Local rows keep their provenance: the ``source`` column (``local`` for every local row, the
release's own value otherwise) survives the combination, and :func:`local_summary` records in each
model's metadata how many local rows it was trained with and on which GPUs (``traintime predict``
prints it: :func:`trained_with_line`). Local columns the released table lacks (host, versions,
timings) are dropped so that the estimators see the same columns as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from traintime.core.errors import ConfigError

TRAIN_ON = ("released_and_local", "released_only")
#: local convergence runs that count as training rows (diverged / failed runs do not)
CONVERGENCE_STATUSES = ("converged", "max_epochs")


def check_train_on(train_on: str) -> str:
    if train_on not in TRAIN_ON:
        raise ConfigError(f"collect.train_on {train_on!r} is not one of {', '.join(TRAIN_ON)}")
    return train_on


def _usable_local(local: pd.DataFrame, kind: str) -> pd.DataFrame:
    if local is None or local.empty or "status" not in local.columns:
        return local if local is not None else pd.DataFrame()
    ok = ("ok",) if kind == "iteration" else CONVERGENCE_STATUSES
    return local[local["status"].astype(str).isin(ok)]


def combine_rows(released: pd.DataFrame, local: pd.DataFrame | None, train_on: str,
                 kind: str = "iteration") -> tuple[pd.DataFrame, dict[str, Any]]:
    """(training table, summary): ``released`` plus the usable rows of ``local`` (``kind`` iteration:
    status ``ok``; convergence: ``converged`` or ``max_epochs``) reduced to the released columns (plus
    ``source``), unless ``train_on`` is ``released_only``. The summary is :func:`local_summary`."""
    check_train_on(train_on)
    used = pd.DataFrame() if train_on == "released_only" or local is None else _usable_local(local, kind)
    if used.empty:
        return released.reset_index(drop=True), local_summary(used, train_on, len(released))
    summary = local_summary(used, train_on, len(released))  # before the local-only columns (gpu) go
    cols = list(released.columns) + (["source"] if "source" not in released.columns else [])
    used = used.reindex(columns=cols).copy()
    used["source"] = used["source"].fillna("local")
    if "raw_row" in cols:  # local rows follow the released ones in the training order
        top = pd.to_numeric(released["raw_row"], errors="coerce").max()  # NaN for an empty release
        start = 0 if pd.isna(top) else int(top)
        used["raw_row"] = range(start + 1, start + 1 + len(used))
    table = pd.concat([released, used.dropna(axis=1, how="all")], ignore_index=True).reindex(columns=cols)
    return table, summary


def combine_gpu_rows(released: pd.DataFrame, local: pd.DataFrame | None, spec_gpus: Any,
                     train_on: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """:func:`combine_rows` for the step-time models: only local rows of a GPU in ``spec_gpus`` (names of the spec
    table) count; the others (a CPU, a card without specs: no roofline, no hardware features) are left out and
    recorded in the summary (``left_out_local_rows``, ``left_out_devices``)."""
    left_out: list[str] = []
    n_left = 0
    if local is not None and len(local) and "gpu" in local.columns:
        has_spec = local["gpu"].astype(str).isin(set(map(str, spec_gpus)))
        left_out = sorted(set(local.loc[~has_spec, "gpu"].astype(str)))
        n_left = int((~has_spec).sum())
        local = local[has_spec]
    table, summary = combine_rows(released, local, train_on, kind="iteration")
    if left_out and train_on != "released_only":
        summary["left_out_local_rows"] = n_left
        summary["left_out_devices"] = left_out
    return table, summary


def local_summary(used: pd.DataFrame, train_on: str, released_rows: int) -> dict[str, Any]:
    """Metadata entry ``training_data``: what the model learnt from."""
    gpus = sorted(map(str, set(used["gpu"].dropna()))) if "gpu" in used.columns and len(used) else []
    per_gpu = ({str(k): int(v) for k, v in used["gpu"].value_counts().sort_index().items()}
               if gpus else {})
    return {"train_on": train_on, "released_rows": int(released_rows), "local_rows": int(len(used)),
            "local_gpus": gpus, "local_rows_per_gpu": per_gpu}


def trained_with_line(what: str, meta: Mapping[str, Any] | None) -> str:
    """``<what>: trained with N local rows from GPU X`` (or released rows only) for the predict header."""
    if meta is None:
        return f"{what}: no saved model file, so no local rows (released rows or assumed constants)"
    td = meta.get("training_data")
    if not td:
        return f"{what}: trained on released rows only (no local-row record in the model)"
    n = int(td.get("local_rows", 0))
    if n == 0:
        why = "collect.train_on: released_only" if td.get("train_on") == "released_only" else "no local rows merged"
        if td.get("note"):
            why = str(td["note"])
        elif td.get("left_out_local_rows"):
            why = (f"{td['left_out_local_rows']} local rows left out: "
                   f"{', '.join(td.get('left_out_devices', []))} has no GPU specs, so no roofline")
        return f"{what}: trained on {td.get('released_rows', '?')} released rows only ({why})"
    gpus = td.get("local_gpus") or []
    label = "GPU" if len(gpus) == 1 else "GPUs"
    return (f"{what}: trained with {n} local rows from {label} {', '.join(gpus)} "
            f"(+ {td.get('released_rows', '?')} released rows)")


def extend_specs(specs: pd.DataFrame, gpus: list[str]) -> pd.DataFrame:
    """``specs`` plus an all-empty row for every local device not in it (e.g. ``cpu``), so models that
    join GPU specifications by name can featurise those rows (spec features missing)."""
    from traintime.measure.local import cpu_spec_row

    out = specs
    for g in sorted(set(map(str, gpus)) - set(specs["gpu"])):
        out = cpu_spec_row(out, g)
    return out
