"""Static side of ``traintime predict``: the workload (model, input, samples, batch, precision), its analytic
features and the step-time rows given to the step-time model -- no probe, no data, no GPU.

* The model is a registry / timm / torchvision name (:func:`traintime.measure.models.resolve_model`) or
  ``module:function`` (called as ``function(num_classes=K)``, with ``img_size=PX`` where it accepts it).
* The input is a dataset name (its classes, native size, training samples; ``imagenet`` is known here
  without its files) or ``--input-size PX --num-classes K [--num-samples N]``; an explicit input size
  overrides the dataset's (ImageNet at 224, CIFAR at 224 ...).
* Features are shape-derived on the ``meta`` device (forward FLOPs only, so a ResNet-50 costs well under a
  second) and cached per (model, input size, classes).
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd

from traintime.core.errors import TraintimeError, UnknownNameError

#: datasets known by size only (no loader: they cannot be probed without their files)
EXTRA_DATASETS: dict[str, tuple[str, int, int, int]] = {
    # name: (display name, classes, native px, training samples)
    "imagenet": ("ImageNet", 1000, 224, 1281167),
    "imagenet1k": ("ImageNet", 1000, 224, 1281167),
}

#: ``tf32``: a 32-bit run with PyTorch's defaults on a card with TF32 tensor cores (its convolutions run TF32,
#: its matmuls FP32; :func:`traintime.predict_plan.tf32_step_ms`)
PRECISIONS = ("32", "16", "bf16", "tf32")


@dataclass(frozen=True)
class Workload:
    """What is trained: ``model`` name, ``family``, ``input_px``, ``num_classes``, ``num_samples`` (None:
    unknown, epoch time not computable), ``batch_size``, ``precision`` (32 | 16 | bf16 | tf32), ``optimizer``,
    ``dataset`` (display name or ``custom``), ``probe_dataset`` (canonical name a probe can load, or None)."""

    model: str
    family: str
    input_px: int
    num_classes: int
    num_samples: int | None
    batch_size: int
    precision: str
    optimizer: str
    dataset: str
    probe_dataset: str | None
    model_source: str

    @property
    def bytes_per_scalar(self) -> int:
        return 4 if self.precision in ("32", "tf32") else 2


def normalise_precision(p: Any) -> str:
    s = str(p).strip().lower().replace("-", "")
    s = {"fp32": "32", "float32": "32", "fp16": "16", "float16": "16", "mixed": "16", "bfloat16": "bf16"}.get(s, s)
    if s not in PRECISIONS:
        raise UnknownNameError(f"precision {p!r} is not supported (use 32, 16, bf16 or tf32)")
    return s


def _module_function(spec: str) -> Any:
    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as exc:
        raise UnknownNameError(f"model {spec!r}: cannot import {fn!r} from {mod!r} ({exc})") from None


def resolve_family(model: str, family: str | None = None) -> tuple[str, str, str]:
    """(display name, family, source) of ``model``; ``family`` overrides the guess."""
    if ":" in model:
        _module_function(model)
        from traintime.measure.models import _guess_family

        return model, family or _guess_family(model.partition(":")[2]), "module:function"
    from traintime.measure.models import resolve_model

    r = resolve_model(model)
    name = r.spec.chronos_name if r.spec is not None else r.name
    return name, family or r.family, r.source


def _dataset_fields(model: str, dataset: str, source: str) -> dict[str, Any]:
    """Display name, classes, input px (the model's own where it fixes one), samples, probe dataset."""
    from traintime.measure.datasets import dataset_info

    try:
        info = dataset_info(dataset)
    except UnknownNameError as exc:
        raise UnknownNameError(f"{exc}; or give --input-size PX --num-classes K") from None
    px = info.img_px
    if source != "module:function":
        from traintime.measure.models import model_img_px

        px = model_img_px(model, px)
    return {"display": info.chronos_name, "classes": int(info.num_classes), "px": int(px),
            "samples": int(info.train_size), "probe": info.name}


def _resolved(model: str, dataset: str | None) -> dict[str, Any]:
    """Name resolution of a registry / timm / torchvision ``model`` (and of ``dataset`` when it needs the
    measure package), through the on-disk cache (:mod:`traintime.predict_cache`: no torch import on a hit).
    ``module:function`` models are resolved afresh every time (user code may change)."""

    def build() -> dict[str, Any]:
        name, fam, source = resolve_family(model)
        out: dict[str, Any] = {"name": name, "family": fam, "source": source}
        if dataset is not None:
            out["dataset"] = _dataset_fields(model, dataset, source)
        return out

    if ":" in model:
        return build()
    from traintime.predict_cache import cached

    return cached("resolve", {"model": model, "dataset": dataset}, build)


def make_workload(model: str, batch_size: int, precision: Any = "32", optimizer: str = "sgd",
                  dataset: str | None = None, input_size: int | None = None, num_classes: int | None = None,
                  num_samples: int | None = None, family: str | None = None) -> Workload:
    """Validate and resolve the request (see module doc); bad input raises a one-line error."""
    from traintime.measure.optimizers import optimizer_label

    if int(batch_size) < 1:
        raise TraintimeError(f"batch size {batch_size} must be >= 1")
    if input_size is not None and int(input_size) < 8:
        raise TraintimeError(f"input size {input_size} px must be >= 8")
    prec = normalise_precision(precision)
    opt = optimizer_label(optimizer)
    probe_ds: str | None = None
    key = None if dataset is None else str(dataset).lower().replace("-", "").replace("_", "")
    r = _resolved(model, None if key is None or key in EXTRA_DATASETS else str(dataset))
    name, fam, source = r["name"], family or r["family"], r["source"]
    if dataset is not None:
        if key in EXTRA_DATASETS:
            disp, k, px, n = EXTRA_DATASETS[key]
        else:
            d = r["dataset"]
            disp, k, px, n, probe_ds = d["display"], d["classes"], d["px"], d["samples"], d["probe"]
        px = int(input_size) if input_size is not None else px
        k = int(num_classes) if num_classes is not None else k
        n = int(num_samples) if num_samples is not None else n
    else:
        if input_size is None or num_classes is None:
            raise TraintimeError("give --dataset NAME, or --input-size PX and --num-classes K")
        disp, px, k = "custom", int(input_size), int(num_classes)
        n = int(num_samples) if num_samples is not None else None
    return Workload(model=model, family=fam, input_px=int(px), num_classes=int(k), num_samples=n,
                    batch_size=int(batch_size), precision=prec, optimizer=opt,
                    dataset=disp, probe_dataset=probe_ds, model_source=source)


def build_model(model: str, num_classes: int, input_px: int, **kwargs: Any) -> Any:
    """The untrained network (registry / timm / torchvision, or ``module:function``)."""
    if ":" in model:
        fn = _module_function(model)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        extra = {"img_size": input_px} if "img_size" in params else {}
        return fn(num_classes=num_classes, **extra, **kwargs)
    from traintime.measure.models import create_model

    return create_model(model, num_classes, input_px, **kwargs)


#: fields of :func:`traintime.measure.analytic.model_structure` the static features use (cached on disk)
STRUCTURE_FIELDS: tuple[str, ...] = ("param_count", "flops_fwd_per_sample", "act_scalars", "depth", "bn_layers",
                                     "act_layers", "flops_fwd_hook_per_sample", "flops_1x1_frac", "flops_3x3_frac",
                                     "flops_depthwise_frac", "flops_grouped_frac", "saved_bytes_per_sample")
#: fields of the structure that are counts (the others are floats)
_COUNT_FIELDS = frozenset({"param_count", "act_scalars", "depth", "bn_layers", "act_layers",
                           "saved_bytes_per_sample"})


def _walk_structure(model: str, input_px: int, num_classes: int, kwargs: dict[str, Any]) -> dict[str, Any]:
    import torch

    from traintime.measure.analytic import model_structure

    with torch.device("meta"):
        net = build_model(model, num_classes, input_px, **kwargs)
    s = model_structure(net, input_px, backward=False)
    return {k: (int(s[k]) if k in _COUNT_FIELDS else float(s[k])) for k in STRUCTURE_FIELDS}


@lru_cache(maxsize=32)
def _structure(model: str, input_px: int, num_classes: int,
               kwargs_items: tuple[tuple[str, Any], ...]) -> tuple[dict | None, str | None]:
    """(per-sample structure of the network (:data:`STRUCTURE_FIELDS`), None), or (None, why it cannot be built at
    this input size): from the on-disk cache of :mod:`traintime.predict_cache` where present (no torch import), else
    built on the meta device and stored. A model that cannot be built at this size is stored too (``unbuildable``:
    the message; the key holds the torch / torchvision / timm versions), so a later process answers it without
    importing torch. ``module:function`` models are never cached on disk (user code may change). The in-process cache
    keeps failures too, so a model that cannot be built is walked once, not once per batch and precision."""
    kwargs = dict(kwargs_items)

    def build() -> dict[str, Any]:
        try:
            return _walk_structure(model, input_px, num_classes, kwargs)
        except TraintimeError:
            raise
        except Exception as exc:  # a model that cannot be built at this input size
            return {"unbuildable": f"model {model!r} cannot be built for {input_px} px input, {num_classes} classes: "
                                   f"{exc}"}

    if ":" in model:
        value = build()
    else:
        from traintime.predict_cache import cached

        parts = {"model": model, "input_px": int(input_px), "num_classes": int(num_classes),
                 "model_kwargs": [[k, v] for k, v in kwargs_items], "fields": list(STRUCTURE_FIELDS)}
        value = cached("structure", parts, build)
    return (None, str(value["unbuildable"])) if "unbuildable" in value else (value, None)


def static_features(w: Workload, model_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Analytic features of the workload at its batch, input size and precision (FLOPs scale with batch
    and input size; activation bytes with batch and precision)."""
    from traintime.chronos.neighbour_frozen import kernel_shares
    from traintime.measure.optimizers import optimizer_state_multiplier

    s, error = _structure(w.model, w.input_px, w.num_classes, tuple(sorted((model_kwargs or {}).items())))
    if s is None:
        raise TraintimeError(error)
    p = int(s["param_count"])
    fwd = float(s["flops_fwd_per_sample"])
    return {
        "param_count": p,
        "param_bytes": 4 * p,
        "grad_bytes": 4 * p,
        "optimizer_state_bytes": 4 * p * optimizer_state_multiplier(w.optimizer),
        "flops_fwd_per_sample": fwd,
        "flops_train_per_sample": 3.0 * fwd,
        "flops_train_per_batch": 3.0 * fwd * w.batch_size,
        "act_bytes_per_sample": int(s["act_scalars"]) * w.bytes_per_scalar,
        "saved_bytes_per_sample": int(s["saved_bytes_per_sample"]),  # 32-bit (traintime.measure.memory)
        "layers": int(s["depth"]) + int(s["bn_layers"]) + int(s["act_layers"]),
        # kernel mix: the analytic fractions are of the conv + linear hook total; as shares of the forward FLOPs
        **{k: float(v) for k, v in kernel_shares(s, float(s["flops_fwd_hook_per_sample"]) / max(fwd, 1.0)).items()},
    }


def step_rows(w: Workload, gpus: pd.DataFrame, model_kwargs: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per GPU of ``gpus`` (spec rows) with the columns of
    :data:`traintime.chronos.roofline_step.STEP_ROW_COLUMNS`."""
    f = static_features(w, model_kwargs)
    base = {"model": w.model, "family": w.family, "input_px": w.input_px, "batch_size": w.batch_size,
            "precision": w.precision, "num_classes": w.num_classes, "optimizer": w.optimizer, **f}
    from traintime.chronos.neighbour_frozen import SPEC_COLUMNS

    spec_cols = ["gpu", "fp32_gflops", "fp16_gflops", "memory_bandwidth_gbps"] + [c for c in SPEC_COLUMNS.values()
                                                                                  if c in gpus.columns]
    rows = gpus[spec_cols].reset_index(drop=True)
    if not len(rows) or set(base) & set(spec_cols):  # the scalars one by one (the dtypes of an empty frame)
        rows = rows.copy()
        for k, v in base.items():
            rows[k] = v
        return rows
    # the workload's columns framed at once (a column per scalar, the same dtypes as setting them one by one)
    return pd.concat([rows, pd.DataFrame({k: [v] * len(rows) for k, v in base.items()}, index=rows.index)], axis=1)


def training_range_warnings(w: Workload, data_dir: Any, trained_families: list[str] | None = None,
                            with_traces: bool = False) -> list[str]:
    """Labelled warnings where the request lies outside what the saved models were trained on:
    family, batch size and input size ranges of ``<data_dir>/iteration.csv`` (the step-time training
    data; with ``with_traces``, for a step model also fitted on the consumer-GPU traces, their batch and
    input sizes widen the ranges) and the families of the saved convergence model (``trained_families``)."""
    from pathlib import Path

    out: list[str] = []
    if trained_families is not None and w.family not in trained_families:
        out.append(f"WARNING family: {w.family} ({w.model}) is not among the families the convergence model "
                   f"was trained on ({', '.join(trained_families) or 'none'}); its epochs are an extrapolation")
    path = Path(data_dir) / "iteration.csv"
    if not path.exists():
        out.append(f"WARNING training range: {path} not found, so the batch and input sizes of the "
                   "training data cannot be checked")
        return out
    from traintime.core.io import read_csv

    t = read_csv(path, usecols=lambda c: c in ("family", "batch_size", "input_px"))
    fam = t[t["family"] == w.family] if "family" in t.columns else t
    if fam.empty:
        out.append(f"WARNING family: no {w.family} rows in the step-time training data")
        return out
    batches = pd.to_numeric(fam["batch_size"])
    pxs = pd.to_numeric(fam["input_px"]) if "input_px" in fam.columns else pd.Series(dtype=float)
    rows = f"{w.family} rows"
    traces = Path(data_dir) / "traces.csv"
    if with_traces and traces.exists():
        tr = read_csv(traces, usecols=lambda c: c in ("batch_size", "img_px"))
        batches = pd.concat([batches, pd.to_numeric(tr["batch_size"])])
        pxs = pd.concat([pxs, pd.to_numeric(tr["img_px"])])
        rows += " and the consumer-GPU traces"
    lo, hi = int(batches.min()), int(batches.max())
    if not lo <= w.batch_size <= hi:
        out.append(f"WARNING batch: {w.batch_size} lies outside the training range {lo}-{hi} of {rows}")
    if pxs.notna().any():
        plo, phi = int(pxs.min()), int(pxs.max())
        if not plo <= w.input_px <= phi:
            out.append(f"WARNING input: {w.input_px} px lies outside the training range {plo}-{phi} px "
                       f"of {rows}")
    return out
