"""Analytic features x(c) of a training configuration: FLOPs, memory, intensity, kernel mix.

Everything is computed from shapes on the ``meta`` device by default (no memory, no arithmetic),
so features of ViT-B/16 or VGG-16 take about a second on a CPU.

FLOPs
    Counted by :class:`torch.utils.flop_counter.FlopCounterMode` (a multiply-add = 2 FLOPs; matmul,
    convolution and attention kernels; normalisation, activation and pooling are not counted) for
    one forward and one backward pass of a batch of one sample. torch's formula for
    ``convolution_backward`` ignores ``groups`` (a depthwise 3x3 backward would count as a dense
    one, ~30x too much on MobileNetV2); :func:`count_flops` replaces it by a grouped-aware formula.

Column semantics follow the released CHRONOS collection code (``epoch_time_collection/*.py``),
family by family, so local rows merge with the released meta-dataset:

``flops_fwd_per_sample``
    forward FLOPs of one sample (measured here; CHRONOS: conv/linear forward hooks for CNNs, a
    hand formula for the MLPs; absent for Transformers, see ``flops_fwd_per_token``).
``flops_train_per_sample``, ``flops_train_per_batch``
    ``3 x flops_fwd_per_sample`` (x batch), the CHRONOS convention. The measured forward +
    backward count is ``flops_train_measured_per_sample`` (``flops_bwd_per_sample`` alone).
``flops_fwd_per_token``, ``flops_train_per_seq``
    Transformer family only, with CHRONOS' formula (multiply-adds of one block per token; its
    attention term is ``2 seq d_model d_head``) so values are comparable with the released rows.
``param_bytes`` = 4 P; ``grad_bytes`` = 4 P; ``optimizer_state_bytes`` = ``param_bytes`` x
    (2 for Adam/AdamW/Adafactor, 1 otherwise); ``master_param_bytes`` = ``param_bytes`` when mixed
    precision is on, else 0; ``total_state_bytes`` = params + optimizer state + master copy.
``act_bytes_per_sample_proxy``
    CNN: per-sample outputs of Conv2d/Linear/ReLU/BatchNorm2d/MaxPool/AvgPool modules x bytes per
    scalar (2 at 16-bit, else 4); MLP: num_patches x embed_dim x depth x bytes; Transformer:
    seq_len x (d_model + d_ff) x bytes.
``arithmetic_intensity_train``
    training FLOPs per sample / max(1, ``param_bytes`` + activation proxy), FLOP/byte.
``flops_{1x1,3x3,depthwise,grouped}_frac``
    shares of forward conv FLOPs (denominator: conv + linear forward FLOPs, CHRONOS' hook total):
    depthwise = groups == C_in == C_out (also counted as grouped); grouped = groups > 1
    (a grouped 3x3 also counts as 3x3); 1x1 and 3x3 otherwise by kernel size.
``depth`` = Conv2d + Linear modules; ``bn_layers`` / ``act_layers`` = BatchNorm2d calls /
    ReLU, ReLU6, SiLU, Mish, GELU calls in one forward; ``sum_hwC`` / ``max_hwC`` over Conv2d outputs.
``saved_bytes_per_sample``
    bytes autograd keeps for the backward pass of one sample at 32 bits (:class:`SavedTensorBytes`), the
    batch-dependent part of training memory (:mod:`traintime.measure.memory`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from traintime.measure.datasets import dataset_info
from traintime.measure.models import (
    create_model,
    model_arch,
    model_img_px,
    resolve_model,
)

aten = torch.ops.aten

#: optimizer-state multiplier of the released code (states per parameter)
from traintime.measure.optimizers import _OPT_STATES, optimizer_state_multiplier  # noqa: E402,F401


def _prod(xs: Any) -> int:
    out = 1
    for v in xs:
        out *= int(v)
    return out


def _conv_backward_grouped_flop(grad_out_shape: Any, x_shape: Any, w_shape: Any, _bias: Any, _stride: Any,
                                _padding: Any, _dilation: Any, transposed: bool, _output_padding: Any,
                                _groups: Any, output_mask: Any, out_shape: Any = None, **_: Any) -> int:
    """FLOPs of ``convolution_backward``: one forward-sized conv per requested gradient.

    The weight tensor already holds ``C_in / groups`` (or ``C_out / groups`` when transposed)
    input channels, so ``2 x N x spatial x prod(w_shape)`` is the grouped forward cost; the input
    gradient and the weight gradient each cost that much again.
    """
    spatial = (x_shape if transposed else grad_out_shape)[2:]
    fwd = 2 * int(x_shape[0]) * _prod(spatial) * _prod(w_shape)
    return fwd * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


@dataclass(frozen=True)
class FlopCount:
    """Forward and backward FLOPs of one pass (whatever batch the input had)."""

    forward: int
    backward: int

    @property
    def train(self) -> int:
        return self.forward + self.backward


def count_flops(model: nn.Module, x: torch.Tensor, backward: bool = True) -> FlopCount:
    """FLOPs of ``model(x)`` and of the backward of ``model(x).sum()`` (parameters only need grads;
    the input gets none, as in training). Works on ``meta`` tensors."""
    mapping = {aten.convolution_backward: _conv_backward_grouped_flop}
    fwd_mode = FlopCounterMode(display=False, custom_mapping=mapping)
    with fwd_mode:
        y = model(x)
    fwd = fwd_mode.get_total_flops()
    bwd = 0
    if backward:
        out = y if isinstance(y, torch.Tensor) else y[0]
        bwd_mode = FlopCounterMode(display=False, custom_mapping=mapping)
        with bwd_mode:
            out.float().sum().backward()
        bwd = bwd_mode.get_total_flops()
    return FlopCount(int(fwd), int(bwd))


def _storage_key(t: torch.Tensor) -> int:
    """One key per tensor storage (a view shares its base's key); works on ``meta`` tensors, which have no data
    pointer. Tensors without a plain storage fall back to the object's identity."""
    try:
        return int(t.untyped_storage()._cdata)
    except (AttributeError, RuntimeError, NotImplementedError):  # pragma: no cover - sparse / nested tensors
        return id(t)


def _storage_bytes(t: torch.Tensor) -> int:
    try:
        return int(t.untyped_storage().nbytes())
    except (AttributeError, RuntimeError, NotImplementedError):  # pragma: no cover - sparse / nested tensors
        return int(t.numel() * t.element_size())


class SavedTensorBytes:
    """Bytes autograd saves for the backward pass while the ``with`` block runs a forward of ``model``
    (:func:`torch.autograd.graph.saved_tensors_hooks`): each storage counted once, whole (a view or a tensor that
    several operators save is one storage), the model's parameters left out (they are model state). Sizes only,
    so it works on the ``meta`` device."""

    def __init__(self, model: nn.Module) -> None:
        self._params = {_storage_key(p) for p in model.parameters()}
        self._sizes: dict[int, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, torch.Tensor):
            key = _storage_key(t)
            if key not in self._params and key not in self._sizes:
                self._sizes[key] = _storage_bytes(t)
        return t

    def __enter__(self) -> Self:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)

    @property
    def total(self) -> int:
        return int(sum(self._sizes.values()))


class _LayerStats:
    """Forward hooks reproducing CHRONOS' per-module statistics (see module doc)."""

    ACT_TYPES = (nn.ReLU, nn.ReLU6, nn.SiLU, nn.Mish, nn.GELU)
    PROXY_TYPES = (nn.Conv2d, nn.Linear, nn.ReLU, nn.BatchNorm2d, nn.MaxPool2d, nn.AvgPool2d)

    def __init__(self) -> None:
        self.total = 0.0
        self.k1x1 = 0.0
        self.k3x3 = 0.0
        self.depthwise = 0.0
        self.grouped = 0.0
        self.act_scalars = 0
        self.sum_hwc = 0
        self.max_hwc = 0
        self.bn_layers = 0
        self.act_layers = 0
        self._handles: list[Any] = []

    def hook(self, module: nn.Module, inputs: Any, output: Any) -> None:
        if isinstance(module, nn.Conv2d) and isinstance(output, torch.Tensor) and output.ndim == 4:
            cin, cout = int(inputs[0].shape[1]), int(output.shape[1])
            kh, kw = module.kernel_size
            groups = max(1, int(module.groups))
            flops = 2.0 * (cin / groups) * cout * kh * kw * int(output.shape[2]) * int(output.shape[3])
            self.total += flops
            if groups == cin and cout == cin:
                self.depthwise += flops
                self.grouped += flops
            elif groups > 1:
                self.grouped += flops
                if (kh, kw) == (3, 3):
                    self.k3x3 += flops
            elif (kh, kw) == (1, 1):
                self.k1x1 += flops
            elif (kh, kw) == (3, 3):
                self.k3x3 += flops
            hwc = int(output.shape[1] * output.shape[2] * output.shape[3])
            self.sum_hwc += hwc
            self.max_hwc = max(self.max_hwc, hwc)
        elif isinstance(module, nn.Linear):
            self.total += 2.0 * module.in_features * module.out_features
        if isinstance(module, nn.BatchNorm2d):
            self.bn_layers += 1
        if isinstance(module, self.ACT_TYPES):
            self.act_layers += 1
        if isinstance(module, self.PROXY_TYPES) and isinstance(output, torch.Tensor):
            self.act_scalars += _prod(output.shape[1:])

    def attach(self, model: nn.Module) -> None:
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear, nn.BatchNorm2d, nn.MaxPool2d, nn.AvgPool2d, *self.ACT_TYPES)):
                self._handles.append(m.register_forward_hook(self.hook))

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def fractions(self) -> dict[str, float]:
        tot = self.total if self.total > 0 else 1.0
        return {"flops_1x1_frac": self.k1x1 / tot, "flops_3x3_frac": self.k3x3 / tot,
                "flops_depthwise_frac": self.depthwise / tot, "flops_grouped_frac": self.grouped / tot}


def chronos_transformer_flops_per_token(seq_len: int, d_model: int, n_heads: int, d_ff: int) -> float:
    """CHRONOS' per-token, per-block multiply-add count (released ``flops_transformer_block``):
    4 d^2 (QKV + output projections) + 2 seq d d_head (its attention term) + 2 d d_ff."""
    d_head = max(1, d_model // n_heads)
    return float(4 * d_model * d_model + 2 * seq_len * d_model * d_head + 2 * d_model * d_ff)


def trainable_param_count(model: Any) -> int:
    """Parameters training updates (``requires_grad``) of a torch module."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def model_structure(model: nn.Module, img_px: int, device: str | torch.device = "meta",
                    backward: bool = True) -> dict[str, Any]:
    """Shape-derived structure of ``model`` for one (3, img_px, img_px) sample: measured forward /
    backward FLOPs (backward NaN when ``backward=False``), CHRONOS hook statistics, parameter count
    (trainable), depth."""
    model = model.to(device) if str(device) != "meta" else model
    model.eval()
    stats = _LayerStats()
    stats.attach(model)
    x = torch.zeros(1, 3, img_px, img_px, device=device)
    try:
        with SavedTensorBytes(model) as saved:
            flops = count_flops(model, x, backward=backward)
    finally:
        stats.detach()
    model.zero_grad(set_to_none=True)
    params = trainable_param_count(model)
    depth = sum(1 for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear)))
    return {
        "param_count": int(params),
        "depth": int(depth),
        "flops_fwd_per_sample": float(flops.forward),
        "flops_bwd_per_sample": float(flops.backward) if backward else float("nan"),
        "flops_train_measured_per_sample": float(flops.train) if backward else float("nan"),
        "flops_fwd_hook_per_sample": float(stats.total),
        "act_scalars": int(stats.act_scalars),
        "sum_hwC": int(stats.sum_hwc),
        "max_hwC": int(stats.max_hwc),
        "bn_layers": int(stats.bn_layers),
        "act_layers": int(stats.act_layers),
        "saved_bytes_per_sample": int(saved.total),
        **stats.fractions(),
    }


def analytic_features(model_name: str, dataset: str, batch_size: int, optimizer: str = "sgd",
                      precision_bits: int = 32, amp: bool | None = None, img_px: int | None = None,
                      model_kwargs: dict[str, Any] | None = None,
                      structure: dict[str, Any] | None = None, backward: bool = True) -> dict[str, Any]:
    """x(c) for one configuration, as one dict of CHRONOS-named columns (units: FLOPs, bytes).

    ``img_px``: input size (default: the model's CHRONOS size for the dataset). ``amp``: mixed
    precision on (default: ``precision_bits == 16``). ``structure``: a cached
    :func:`model_structure` result for the same model and input size (it does not depend on the
    batch, optimizer or precision). ``backward=False`` skips counting the backward pass (faster;
    the ``*_bwd_*`` / ``*_measured_*`` columns are then NaN).
    """
    info = dataset_info(dataset, img_px=img_px)
    resolved = resolve_model(model_name)
    px = img_px or model_img_px(model_name, info.img_px)
    kwargs = dict(model_kwargs or {})
    if structure is None:
        with torch.device("meta"):
            model = create_model(model_name, info.num_classes, px, **kwargs)
        structure = model_structure(model, px, backward=backward)
    amp = (int(precision_bits) == 16) if amp is None else bool(amp)
    bytes_per_scalar = 2 if int(precision_bits) == 16 else 4
    arch = model_arch(model_name, px, **kwargs)
    p = int(structure["param_count"])
    param_bytes = 4 * p
    opt_bytes = param_bytes * optimizer_state_multiplier(optimizer)
    master = param_bytes if amp else 0
    fwd = float(structure["flops_fwd_per_sample"])
    row: dict[str, Any] = {
        "family": resolved.family,
        "img_px": int(px),
        "num_classes": int(info.num_classes),
        **structure,
        "param_bytes": param_bytes,
        "grad_bytes": param_bytes,
        "optimizer_state_bytes": opt_bytes,
        "master_param_bytes": master,
        "total_state_bytes": param_bytes + opt_bytes + master,
        "flops_train_per_sample": 3.0 * fwd,
        "flops_train_per_batch": 3.0 * fwd * int(batch_size),
        "flops_train_measured_per_batch": float(structure["flops_train_measured_per_sample"]) * int(batch_size),
        # the walk's Conv2d + Linear count, kept where ``depth`` becomes the MLP / Transformer block count below
        "conv_linear_modules": int(structure["depth"]),
    }
    if resolved.family == "MLP" and arch:
        act = arch["num_patches"] * arch["embed_dim"] * arch["depth"] * bytes_per_scalar
        row.update({k: arch[k] for k in ("embed_dim", "patch_size", "token_mlp_dim", "channel_mlp_dim",
                                          "num_patches")})
        row["depth"] = int(arch["depth"])
    elif resolved.family == "Transformer" and arch:
        act = arch["seq_len"] * (arch["d_model"] + arch["d_ff"]) * bytes_per_scalar
        per_token = chronos_transformer_flops_per_token(arch["seq_len"], arch["d_model"], arch["n_heads"],
                                                        arch["d_ff"])
        row.update({k: arch[k] for k in ("d_model", "n_heads", "d_ff", "seq_len", "patch_size")})
        row["depth"] = int(arch["depth"])
        row["flops_fwd_per_token"] = per_token
        row["flops_train_per_seq"] = per_token * arch["seq_len"] * arch["depth"] * 3.0
    else:
        act = int(structure["act_scalars"]) * bytes_per_scalar
    row["act_bytes_per_sample_proxy"] = int(act)
    train_flops = row.get("flops_train_per_seq", row["flops_train_per_sample"])
    row["arithmetic_intensity_train"] = float(train_flops) / max(1.0, float(param_bytes + act))
    row["activation_bytes_per_batch_proxy"] = int(act) * int(batch_size)
    return row


def structure_for(model_name: str, dataset: str, img_px: int | None = None,
                  model_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`model_structure` of a named model at its CHRONOS input size for ``dataset`` (meta)."""
    info = dataset_info(dataset, img_px=img_px)
    px = img_px or model_img_px(model_name, info.img_px)
    with torch.device("meta"):
        model = create_model(model_name, info.num_classes, px, **(model_kwargs or {}))
    return model_structure(model, px)


#: analytic columns copied unchanged into a canonical ``iteration`` row
_ITERATION_COPY: tuple[str, ...] = (
    "depth", "embed_dim", "patch_size", "token_mlp_dim", "channel_mlp_dim", "num_patches", "d_model", "n_heads",
    "d_ff", "seq_len", "conv_linear_modules", "bn_layers", "act_layers", "flops_1x1_frac", "flops_3x3_frac",
    "flops_depthwise_frac", "flops_grouped_frac", "param_count", "param_bytes", "grad_bytes", "optimizer_state_bytes",
    "master_param_bytes", "total_state_bytes", "flops_fwd_per_sample", "flops_bwd_per_sample",
    "flops_train_measured_per_sample", "flops_fwd_per_token", "act_bytes_per_sample_proxy")


def iteration_columns(feats: dict[str, Any], batch_size: int) -> dict[str, Any]:
    """:func:`analytic_features` output -> columns of the canonical ``iteration`` table
    (:data:`traintime.data.chronos.ITERATION` names: ``sum_hwc``, ``arithmetic_intensity_flop_per_byte``;
    Transformer ``flops_train_per_sample`` is per sequence, as the release's ``flops_train_per_seq``)."""
    row = {k: feats[k] for k in _ITERATION_COPY if k in feats}
    row["sum_hwc"] = feats["sum_hwC"]
    row["max_hwc"] = feats["max_hwC"]
    if feats.get("family") == "Transformer" and "flops_train_per_seq" in feats:
        row["flops_train_per_sample"] = feats["flops_train_per_seq"]
        row["flops_train_per_batch"] = feats["flops_train_per_seq"] * int(batch_size)
        row["d_head"] = feats["d_model"] // feats["n_heads"]
    else:
        row["flops_train_per_sample"] = feats["flops_train_per_sample"]
        row["flops_train_per_batch"] = feats["flops_train_per_batch"]
    row["arithmetic_intensity_flop_per_byte"] = feats["arithmetic_intensity_train"]
    return row
