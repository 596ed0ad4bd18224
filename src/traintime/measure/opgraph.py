"""Operator graph of one training step: FLOPs, bytes and operator count per operator class and phase.

What a walk is
    The model is built on the **meta device** (shapes only, no memory, no arithmetic) and one
    training step runs under torch's dispatch-level ``FlopCounterMode`` with the op recorder of
    :mod:`traintime.emulation.profile_ops` on top of it (reused, not duplicated): every aten op that
    reaches the dispatcher gives its FLOPs (torch's shape formulas: conv, matmul, attention and their
    backward; every other op counts 0) and its minimum DRAM bytes
    (:func:`traintime.emulation.profile_ops.op_bytes`; alias-only ops move nothing and are dropped).
    The step is run in three phases, recorded apart: ``fwd`` (forward and loss), ``bwd``
    (``loss.backward()``) and ``opt`` (``zero_grad(set_to_none=False)`` and ``optimizer.step()``).

Operator classes (:func:`op_class`)
    ``conv`` (convolution and its backward), ``matmul`` (mm / addmm / bmm / baddbmm / linear),
    ``attention`` (fused scaled-dot-product attention), ``norm`` (batch / layer / group norm and
    their backward), ``other`` (elementwise, activation, pooling, softmax, reductions, copies,
    loss). Every op of the ``opt`` phase is class ``optimizer``.

Batch scaling
    Every FLOP and byte count of a training step is affine in the batch size (activations are
    linear in B; parameters, gradients and optimizer state are constant), so :func:`walk_table`
    walks at batch 2 and 3 and extrapolates exactly: q(B) = q(2) + (q(3) - q(2)) (B - 2). (Batch 1
    is avoided: some models take other code paths for a singleton batch, e.g. views instead of copies.)
    ``tests/test_steptime.py`` checks the extrapolation against a walk at the batch itself.

Precision
    Walks run in fp32 (autocast is not available on the meta device). Under fp16/bf16 autocast the
    FLOPs are the same; the byte counts of the fp32 walk are kept and the precision enters the
    step-time model through the peak throughput it uses and a learned per-precision efficiency
    (:mod:`traintime.chronos.steptime`). This is an approximation, stated in the result tables.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import SchemaError, TraintimeError

log = logging.getLogger(__name__)

PHASES: tuple[str, ...] = ("fwd", "bwd", "opt")
OP_CLASSES: tuple[str, ...] = ("conv", "matmul", "attention", "norm", "other", "optimizer")
#: Columns of an op-graph table (one row per model, img_px, batch_size, phase, op_class).
OPGRAPH_COLUMNS: tuple[str, ...] = ("model", "img_px", "batch_size", "phase", "op_class", "n_ops", "flops",
                                    "bytes")

_CONV = ("convolution", "_convolution", "convolution_backward", "cudnn_convolution", "conv2d", "conv1d")
_MATMUL = ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_addmm_activation")
_NORM = ("native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
         "_native_batch_norm_legit_no_training", "_batch_norm_with_update", "batch_norm_backward",
         "native_layer_norm", "native_layer_norm_backward", "native_group_norm", "native_group_norm_backward",
         "_fused_rms_norm", "_fused_rms_norm_backward")


def op_class(name: str, phase: str) -> str:
    """Operator class of an aten op (``aten::convolution.default`` or ``aten.convolution``) in a phase."""
    if phase == "opt":
        return "optimizer"
    base = name.replace("aten::", "").replace("aten.", "").split(".")[0]
    if base in _CONV:
        return "conv"
    if base in _MATMUL:
        return "matmul"
    if "scaled_dot_product" in base or "flash_attention" in base or "efficient_attention" in base:
        return "attention"
    if base in _NORM:
        return "norm"
    return "other"


def walk_step(model: Any, inputs: Any, targets: Any, optimizer_factory: Callable[[Any], Any] | None = None
              ) -> pd.DataFrame:
    """Walk one training step of ``model`` (already on the meta device) and return per-op rows.

    ``inputs``/``targets``: meta tensors (targets: class indices for cross-entropy).
    ``optimizer_factory(params)``: defaults to SGD (lr 0.01, momentum 0.9) as in the traces.
    Returns one row per recorded non-alias op: phase, op_name, op_class, flops, bytes.
    An unrecorded optimizer step on zero gradients first creates the optimizer state (momentum
    buffers), as the timed steps see it.
    """
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from traintime.emulation.profile_ops import op_recorder

    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise SchemaError("the model has no trainable parameters: nothing to train")
    opt = (optimizer_factory or (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.9)))(params)
    crit = torch.nn.CrossEntropyLoss()

    def fwd() -> Any:
        out = model(inputs)
        if isinstance(out, (tuple, list)):
            out = out[0]
        if hasattr(out, "logits"):
            out = out.logits
        return crit(out, targets)

    # optimizer state (momentum / moment buffers) exists in the timed steps: create it with one
    # unrecorded optimizer step on zero gradients (no forward/backward needed for that)
    for p in params:
        p.grad = torch.zeros_like(p)
    opt.step()
    rows: list[dict[str, Any]] = []
    for phase in PHASES:
        counter = FlopCounterMode(display=False)
        rec = op_recorder(counter)
        with counter, rec:
            if phase == "fwd":
                loss = fwd()
            elif phase == "bwd":
                loss.backward()
            else:
                opt.zero_grad(set_to_none=False)
                opt.step()
        for r in rec.records:
            if r.alias:
                continue
            rows.append({"phase": phase, "op_name": r.name, "op_class": op_class(r.name, phase),
                         "flops": r.flops, "bytes": r.read_bytes + r.write_bytes})
    return pd.DataFrame(rows, columns=["phase", "op_name", "op_class", "flops", "bytes"])


def summarise(ops: pd.DataFrame) -> pd.DataFrame:
    """Per (phase, op_class): n_ops, flops, bytes (sums over the rows of :func:`walk_step`)."""
    g = ops.groupby(["phase", "op_class"], sort=True)
    return g.agg(n_ops=("op_name", "size"), flops=("flops", "sum"), bytes=("bytes", "sum")).reset_index()


def timm_step(model: str, img_px: int, batch_size: int, num_classes: int = 16) -> pd.DataFrame:
    """:func:`summarise` of one traced workload (timm model as the traces build it) on the meta device."""
    import torch

    from traintime.emulation.workload import build_model

    with torch.device("meta"):
        m = build_model(model, int(img_px), num_classes)
        x = torch.randn(int(batch_size), 3, int(img_px), int(img_px))
        y = torch.randint(0, num_classes, (int(batch_size),))
    return summarise(walk_step(m, x, y))


def registry_step(model: str, img_px: int, batch_size: int, num_classes: int = 10) -> pd.DataFrame:
    """:func:`summarise` of a model of :func:`traintime.measure.models.create_model` (torchvision,
    timm or the CHRONOS builders) on image input, on the meta device."""
    import torch

    from traintime.measure.models import create_model

    with torch.device("meta"):
        m = create_model(model, num_classes=num_classes, img_px=int(img_px))
        x = torch.randn(int(batch_size), 3, int(img_px), int(img_px))
        y = torch.randint(0, num_classes, (int(batch_size),))
    return summarise(walk_step(m, x, y))


def extrapolate(at1: pd.DataFrame, at2: pd.DataFrame, batch_sizes: Iterable[int], b1: int = 2) -> pd.DataFrame:
    """Affine extrapolation of two summaries (batch ``b1`` and ``b1 + 1``) to each batch size (module doc)."""
    key = ["phase", "op_class"]
    m = at1.merge(at2, on=key, how="outer", suffixes=("_1", "_2")).fillna(0.0)
    if (m["n_ops_1"] != m["n_ops_2"]).any():
        log.warning("operator counts differ between batch %d and %d; using the larger batch's count", b1, b1 + 1)
    out = []
    for b in batch_sizes:
        d = m[key].copy()
        d["batch_size"] = int(b)
        d["n_ops"] = m["n_ops_2"].astype(int)
        for c in ("flops", "bytes"):
            d[c] = m[f"{c}_1"] + (m[f"{c}_2"] - m[f"{c}_1"]) * (int(b) - b1)
        out.append(d)
    return pd.concat(out, ignore_index=True)


def walk_table(workloads: Sequence[tuple[str, int]], batch_sizes: Sequence[int],
               step: Callable[[str, int, int], pd.DataFrame] = timm_step,
               cache_dir: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """Op-graph table (:data:`OPGRAPH_COLUMNS`) for every (model, img_px) x batch size.

    A workload whose walk fails (e.g. a model that rejects the input size) is skipped with a
    warning; ``attrs['skipped']`` lists them and ``attrs['wall_s']`` holds the total walk time.
    ``cache_dir``: one CSV per workload (``<model>@<px>.csv``, walked at batch 2 and 3) is written
    there and reused when present, so an interrupted build resumes where it stopped.
    """
    t0 = time.perf_counter()
    frames, skipped = [], []
    cache = Path(cache_dir) if cache_dir is not None else None
    if cache is not None:
        cache.mkdir(parents=True, exist_ok=True)
    for model, px in workloads:
        hit = cache / f"{model}@{int(px)}.csv" if cache is not None else None
        try:
            if hit is not None and hit.exists():
                pair = pd.read_csv(hit)
                b2, b3 = (pair[pair["walk_batch"] == b].drop(columns="walk_batch") for b in (2, 3))
            else:
                b2, b3 = step(model, int(px), 2), step(model, int(px), 3)
                if hit is not None:
                    pd.concat([b2.assign(walk_batch=2), b3.assign(walk_batch=3)]).to_csv(hit, index=False)
            s = extrapolate(b2, b3, batch_sizes)
        except TraintimeError:
            raise
        except Exception as exc:  # a model/shape combination torch or timm rejects
            log.warning("op walk of %s at %d px failed: %s", model, px, exc)
            skipped.append(f"{model}@{px}: {type(exc).__name__}")
            continue
        s.insert(0, "img_px", int(px))
        s.insert(0, "model", model)
        frames.append(s)
    if not frames:
        raise SchemaError("no workload could be walked")
    out = pd.concat(frames, ignore_index=True)[list(OPGRAPH_COLUMNS)]
    out.attrs["skipped"] = skipped
    out.attrs["wall_s"] = time.perf_counter() - t0
    return out
