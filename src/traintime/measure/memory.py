"""Training memory of a workload, whether it fits a GPU, and how well that call matches measured out-of-memory runs.

Estimate (bytes) of one training step of batch ``B``::

    memory = state  +  saved x B x a(precision)

``state``: the model state bytes of the static features (:func:`state_bytes`: ``param_bytes`` + ``grad_bytes`` +
``optimizer_state_bytes`` = 4 P x (2 + optimizer states per parameter), :mod:`traintime.measure.analytic`); ``saved``: the
bytes autograd keeps for the backward pass of one sample at 32 bits
(:class:`traintime.measure.analytic.SavedTensorBytes`, on the meta device); ``a`` = 1 at 32 bits (``32``,
``tf32``) and :data:`HALF_ACTIVATIONS` = 0.5 under 16-bit autocast (``16``, ``bf16``: the saved activations are
half precision; the weights stay 32-bit). Not counted: the CUDA context, cuDNN / cuBLAS workspaces, the caching
allocator's fragmentation and the temporaries of the backward pass. They are what the *usable fraction* ``u``
absorbs: the workload is called to fit a card of ``M`` GB when ``memory <= u x M``.

``u`` is the one fitted number (:func:`fit_usable_fraction`: the accuracy-maximising fraction over measured runs
with an out-of-memory label). :func:`leave_one_size_out` scores the call on memory sizes it never saw: ``u`` is
fitted on the runs of every other card memory size and tested on the held-out size's runs (rule
``predict_memory_fit``, on the public consumer-GPU traces: 19 GPUs of 8-32 GB).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError

#: factor on the saved activations under 16-bit autocast (module doc)
HALF_ACTIVATIONS = 0.5
#: precisions whose saved activations are half precision
HALF_PRECISIONS = frozenset({"16", "bf16", "fp16"})
#: fractions of the card memory tried by :func:`fit_usable_fraction`
USABLE_GRID = np.round(np.arange(0.50, 1.2001, 0.005), 3)
GIB = float(2 ** 30)


def state_bytes(features: Mapping[str, Any]) -> float:
    """Weights + gradients + optimizer state, bytes, of a workload's static features (analytic's ``param_bytes``,
    ``grad_bytes``, ``optimizer_state_bytes``)."""
    return float(features["param_bytes"]) + float(features["grad_bytes"]) + float(features["optimizer_state_bytes"])


def _per_sample(saved_bytes_per_sample: Any, precision: Any) -> np.ndarray:
    """Activation bytes per sample at ``precision`` (module doc)."""
    prec = np.asarray(precision, dtype=object).astype(str)
    a = np.where(np.isin(prec, list(HALF_PRECISIONS)), HALF_ACTIVATIONS, 1.0)
    return np.asarray(saved_bytes_per_sample, dtype=float) * a


def training_memory_gb(state: Any, saved_bytes_per_sample: Any, batch_size: Any, precision: Any) -> np.ndarray:
    """Estimated training memory, GiB (module doc); arrays broadcast. ``state``: :func:`state_bytes`;
    ``precision``: ``32``, ``tf32``, ``16``, ``bf16`` (or ``fp32`` / ``fp16``)."""
    per = _per_sample(saved_bytes_per_sample, precision)
    return (np.asarray(state, dtype=float) + per * np.asarray(batch_size, dtype=float)) / GIB


def fits(memory_gb: Any, card_gb: Any, usable_fraction: float) -> np.ndarray:
    """True where the estimate is within ``usable_fraction`` of the card's memory; False where above; None where
    the card's memory (or the estimate) is unknown (an object array)."""
    need, card = np.asarray(memory_gb, dtype=float), np.asarray(card_gb, dtype=float)
    need, card = np.broadcast_arrays(need, card)
    known = np.isfinite(need) & np.isfinite(card) & (card > 0) & np.isfinite(usable_fraction)
    out = np.full(need.shape, None, dtype=object)
    out[known] = [bool(v) for v in need[known] <= usable_fraction * card[known]]  # Python bools: `is False` holds
    return out


def largest_batch(state: Any, saved_bytes_per_sample: Any, precision: Any, card_gb: Any,
                  usable_fraction: float) -> np.ndarray:
    """The largest batch whose estimate (:func:`training_memory_gb`) is within ``usable_fraction`` of ``card_gb``
    (0 where not even the model state fits; NaN where the card's memory, the fraction or the saved bytes are
    unknown or the saved bytes are 0); a float array of whole numbers."""
    per = _per_sample(saved_bytes_per_sample, precision)
    room = usable_fraction * np.asarray(card_gb, dtype=float) * GIB - np.asarray(state, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.floor(np.maximum(room, 0.0) / per)
    return np.where(np.isfinite(b) & (per > 0), b, np.nan)


def called_too_big(fit_calls: Any) -> np.ndarray:
    """True per entry of :func:`fits` output that is False (too big); None (unknown) and True give False."""
    return np.array([v is False for v in fit_calls], dtype=bool)


def fit_usable_fraction(memory_gb: Any, card_gb: Any, oom: Any, grid: np.ndarray = USABLE_GRID) -> float:
    """The fraction of :data:`USABLE_GRID` whose call (out of memory when ``memory > u x card``) agrees with the
    measured ``oom`` labels most often (the middle of the best run of fractions when several tie)."""
    need, card = np.asarray(memory_gb, dtype=float), np.asarray(card_gb, dtype=float)
    y = np.asarray(oom, dtype=bool)
    ok = np.isfinite(need) & np.isfinite(card)
    if not ok.any():
        raise SchemaError("fit_usable_fraction: no run with a finite memory estimate and card size")
    ratio = need[ok] / card[ok]
    acc = np.array([np.mean((ratio > u) == y[ok]) for u in grid])
    best = np.flatnonzero(acc == acc.max())
    run = best[: np.argmax(np.diff(np.append(best, best[-1] + 2)) != 1) + 1]  # first run of tied fractions
    return float(grid[run[len(run) // 2]])


def _scores(flag: np.ndarray, oom: np.ndarray) -> dict[str, float]:
    n_oom, n_ok = int(oom.sum()), int((~oom).sum())
    return {"runs": len(oom), "oom_runs": n_oom, "accuracy_pct": 100.0 * float(np.mean(flag == oom)),
            "oom_caught_pct": 100.0 * float((flag & oom).sum()) / n_oom if n_oom else float("nan"),
            "false_alarm_pct": 100.0 * float((flag & ~oom).sum()) / n_ok if n_ok else float("nan")}


def leave_one_size_out(runs: pd.DataFrame) -> pd.DataFrame:
    """Grouped score of the fit call on ``runs`` (columns ``memory_gb``, ``card_gb``, ``oom``): one row per card
    memory size held out (``u`` fitted on the other sizes' runs), a ``pooled`` row over all held-out runs, and
    the baseline ``no check`` (never calls out of memory) on the same runs."""
    missing = [c for c in ("memory_gb", "card_gb", "oom") if c not in runs.columns]
    if missing:
        raise SchemaError(f"leave_one_size_out: runs lack column(s) {', '.join(missing)}")
    r = runs[np.isfinite(runs["memory_gb"].to_numpy(float)) & np.isfinite(runs["card_gb"].to_numpy(float))]
    sizes = sorted(r["card_gb"].unique())
    if len(sizes) < 2:
        raise SchemaError(f"leave_one_size_out: runs of one card memory size only ({sizes}); need two or more")
    out, flags, labels = [], [], []
    for size in sizes:
        train, test = r[r["card_gb"] != size], r[r["card_gb"] == size]
        u = fit_usable_fraction(train["memory_gb"], train["card_gb"], train["oom"])
        flag = called_too_big(fits(test["memory_gb"], test["card_gb"], u))
        oom = test["oom"].to_numpy(dtype=bool)
        flags.append(flag)
        labels.append(oom)
        out.append({"held_out": f"{size:g} GB", "method": "estimate", "usable_fraction": u,
                    "gpus": test["gpu"].nunique() if "gpu" in test else np.nan, **_scores(flag, oom)})
    flag, oom = np.concatenate(flags), np.concatenate(labels)
    gpus = r["gpu"].nunique() if "gpu" in r else np.nan
    out.append({"held_out": "pooled", "method": "estimate", "usable_fraction": np.nan, "gpus": gpus,
                **_scores(flag, oom)})
    out.append({"held_out": "pooled", "method": "no check", "usable_fraction": np.nan, "gpus": gpus,
                **_scores(np.zeros(len(oom), dtype=bool), oom)})
    return pd.DataFrame(out)
