"""Models by name: a registry of the CHRONOS models (timm-style names), any timm or torchvision name, and their architecture descriptors.

Models
------
:func:`create_model` builds an untrained model (``pretrained=False``; never a network call) from a
name. Names are resolved case-insensitively, ignoring ``-``/``_``/spaces, in this order:

1. the registry of the nine CHRONOS models, under the names the released CHRONOS data uses
   (``resnet50``, ``vgg16``, ``mobilenetv2``, ``densenet121``, ``mixer``, ``resmlp``, ``asmlp``,
   ``DeiT-Tiny``, ``ViT``) and their torchvision/timm spellings;
2. any timm model (``timm.list_models()``), e.g. ``resnet18``, ``convnext_atto``;
3. any torchvision classification model (``torchvision.models.list_models``).

A ``timm/`` or ``torchvision/`` prefix forces the library. An unknown name raises
:class:`~traintime.core.errors.UnknownNameError` with close matches.

The CHRONOS equivalents (documented in docs/analytic_features.md):

=============  ==================================================================================
``resnet50``   torchvision ``resnet50`` with a new ``fc`` head (as the released collection code)
``vgg16``      torchvision ``vgg16_bn`` (the released code uses the batch-norm variant)
``mobilenetv2`` torchvision ``mobilenet_v2``
``densenet121`` torchvision ``densenet121``
``mixer``      timm ``MlpMixer``: patch 8, depth 8 (10 at 64 px), token MLP max(128, D/2), channel 4D
``resmlp``     timm ``MlpMixer`` + ``ResBlock`` (affine norm, layer scale): patch 8, depth 12
``asmlp``      :class:`AxialShiftMLP` (this module): four channel groups shifted by +-1 along H and
               W, concatenated with the input, projected 2D->D, then a 4D channel MLP; depth 12
               (patch 4 at 32 px, else 8). An AS-MLP-like token mixer, as in the released data.
``deit_tiny``  timm ``deit_tiny_patch16_224``
``vit``        timm ``vit_base_patch16_224`` (ViT-B/16)
=============  ==================================================================================

Datasets
--------
:func:`dataset_info` gives a dataset's metadata (classes, native size, train-split size) without
touching data; :func:`load_dataset` returns a ``torch.utils.data.Dataset`` of ``(image, label)``.

``cifar10``, ``cifar100``, ``stl10`` use their torchvision loaders (download only when allowed;
otherwise one :class:`~traintime.core.errors.DataUnavailableError`); ``tinyimagenet`` reads an extracted
``tiny-imagenet-200`` folder (ImageFolder). ``digits`` is scikit-learn's bundled 8x8 digits
(1,797 real images, offline), upsampled bilinearly to ``img_px`` (default 32) and repeated to
3 channels. ``synthetic`` is random Gaussian images with a class-dependent mean (learnable; for
tests): every output row made from it carries ``synthetic=True``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from traintime.core.errors import UnknownNameError

#: CHRONOS model families (the released CSV files).
FAMILIES: tuple[str, ...] = ("CNN", "MLP", "Transformer")


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: canonical ``name`` (as in the CHRONOS data), ``family``, the library it
    comes from and how it is built. ``chronos_name`` is the spelling of the released CSVs."""

    name: str
    family: str
    source: str
    builder: Callable[..., Any]
    chronos_name: str
    aliases: tuple[str, ...] = ()
    #: fixed input size in pixels (Transformers: 224 as in the released code); None = dataset size
    fixed_img_px: int | None = None
    description: str = ""


@dataclass(frozen=True)
class MLPConfig:
    """Hyper-parameters of the CHRONOS token-mixing MLPs at one input size (released defaults)."""

    img_px: int
    patch_size: int
    embed_dim: int
    depth: int
    token_mlp_dim: int
    channel_mlp_dim: int

    @property
    def num_patches(self) -> int:
        return (self.img_px // self.patch_size) ** 2


def mlp_config(model: str, img_px: int, embed_dim: int = 128, depth: int | None = None,
               patch_size: int | None = None) -> MLPConfig:
    """CHRONOS' per-dataset choices, generalised by input size: patch 4 for ``asmlp`` at <= 32 px,
    else 8; ``mixer`` depth 10 at 64 px, 8 otherwise; ``resmlp``/``asmlp`` depth 12; token MLP
    max(128, D/2); channel MLP 4D. ``embed_dim`` 128 or 256 in the released data."""
    m = _norm(model)
    if patch_size is None:
        patch_size = 4 if (m == "asmlp" and img_px <= 32) else 8
        if img_px % patch_size:
            patch_size = next(p for p in (8, 4, 2, 1) if img_px % p == 0)
    if img_px % patch_size:
        raise UnknownNameError(f"model {model!r}: image size {img_px} is not divisible by patch {patch_size}")
    if depth is None:
        depth = (10 if img_px == 64 else 8) if m == "mixer" else 12
    return MLPConfig(img_px=img_px, patch_size=patch_size, embed_dim=embed_dim, depth=depth,
                     token_mlp_dim=max(128, embed_dim // 2), channel_mlp_dim=4 * embed_dim)


def _tv(name: str, head: str) -> Callable[..., Any]:
    def build(num_classes: int, img_px: int, **_: Any) -> Any:
        import torchvision

        return torchvision.models.get_model(name, weights=None, num_classes=num_classes)

    build.__doc__ = f"torchvision {name} (weights=None), classifier {head} sized to num_classes"
    return build


def _timm(name: str) -> Callable[..., Any]:
    def build(num_classes: int, img_px: int, **kw: Any) -> Any:
        import timm

        return timm.create_model(name, pretrained=False, num_classes=num_classes, **kw)

    return build


def _mixer(num_classes: int, img_px: int, embed_dim: int = 128, depth: int | None = None,
           patch_size: int | None = None, **_: Any) -> Any:
    from timm.models.mlp_mixer import MlpMixer

    c = mlp_config("mixer", img_px, embed_dim, depth, patch_size)
    return MlpMixer(num_classes=num_classes, img_size=img_px, patch_size=c.patch_size, num_blocks=c.depth,
                    embed_dim=c.embed_dim, mlp_ratio=(c.token_mlp_dim / c.embed_dim, 4.0))


def _resmlp(num_classes: int, img_px: int, embed_dim: int = 128, depth: int | None = None,
            patch_size: int | None = None, **_: Any) -> Any:
    from timm.models.mlp_mixer import Affine, MlpMixer, ResBlock

    c = mlp_config("resmlp", img_px, embed_dim, depth, patch_size)
    return MlpMixer(num_classes=num_classes, img_size=img_px, patch_size=c.patch_size, num_blocks=c.depth,
                    embed_dim=c.embed_dim, mlp_ratio=4, block_layer=ResBlock, norm_layer=Affine)


def _asmlp(num_classes: int, img_px: int, embed_dim: int = 128, depth: int | None = None,
           patch_size: int | None = None, **_: Any) -> Any:
    c = mlp_config("asmlp", img_px, embed_dim, depth, patch_size)
    return AxialShiftMLP(num_classes=num_classes, img_px=img_px, patch_size=c.patch_size,
                         embed_dim=c.embed_dim, depth=c.depth, hidden_dim=c.channel_mlp_dim)


class _ShiftBlock(nn.Module):
    """Axial-shift token mixing + channel MLP, pre-norm, residual: (N, H, W, D) -> same shape."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        if dim % 4:
            raise ValueError("AxialShiftMLP: embed_dim must be a multiple of 4")
        self.norm1 = nn.LayerNorm(dim)
        self.mix = nn.Linear(2 * dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm1(x)
        parts = torch.split(y, y.shape[-1] // 4, dim=-1)
        shifted = torch.cat([torch.roll(parts[0], 1, dims=1), torch.roll(parts[1], -1, dims=1),
                             torch.roll(parts[2], 1, dims=2), torch.roll(parts[3], -1, dims=2)], dim=-1)
        x = x + self.mix(torch.cat([shifted, x], dim=-1))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


class AxialShiftMLP(nn.Module):
    """AS-MLP-like classifier: conv patch embedding, ``depth`` axial-shift blocks, mean pool, head.

    Input (N, 3, img_px, img_px) -> logits (N, num_classes).
    """

    def __init__(self, num_classes: int, img_px: int, patch_size: int, embed_dim: int, depth: int,
                 hidden_dim: int, in_chans: int = 3) -> None:
        super().__init__()
        self.patch = nn.Conv2d(in_chans, embed_dim, patch_size, stride=patch_size)
        self.blocks = nn.Sequential(*[_ShiftBlock(embed_dim, hidden_dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).permute(0, 2, 3, 1)  # (N, H', W', D)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=(1, 2)))


REGISTRY: tuple[ModelSpec, ...] = (
    ModelSpec("resnet50", "CNN", "torchvision", _tv("resnet50", "fc"), "resnet50", ("resnet-50",),
              description="ResNet-50"),
    ModelSpec("vgg16", "CNN", "torchvision", _tv("vgg16_bn", "classifier[-1]"), "vgg16",
              ("vgg16_bn", "vgg-16"), description="VGG-16 with batch norm"),
    ModelSpec("mobilenetv2", "CNN", "torchvision", _tv("mobilenet_v2", "classifier[-1]"), "mobilenetv2",
              ("mobilenet_v2",), description="MobileNetV2"),
    ModelSpec("densenet121", "CNN", "torchvision", _tv("densenet121", "classifier"), "densenet121",
              ("densenet-121",), description="DenseNet-121"),
    ModelSpec("mixer", "MLP", "timm", _mixer, "mixer", ("mlp-mixer", "mlpmixer"),
              description="MLP-Mixer (CHRONOS widths 128/256)"),
    ModelSpec("resmlp", "MLP", "timm", _resmlp, "resmlp", (), description="ResMLP (CHRONOS widths 128/256)"),
    ModelSpec("asmlp", "MLP", "traintime", _asmlp, "asmlp", ("as-mlp",),
              description="AS-MLP-like axial-shift MLP (CHRONOS widths 128/256)"),
    ModelSpec("deit_tiny", "Transformer", "timm", _timm("deit_tiny_patch16_224"), "DeiT-Tiny",
              ("deit-tiny", "deit_tiny_patch16_224"), fixed_img_px=224, description="DeiT-Tiny/16, 224 px"),
    ModelSpec("vit", "Transformer", "timm", _timm("vit_base_patch16_224"), "ViT",
              ("vit_base_patch16_224", "vit-b/16", "vitb16"), fixed_img_px=224, description="ViT-B/16, 224 px"),
)

#: Transformer architecture hyper-parameters the released Transformer CSV records.
TRANSFORMER_DIMS: dict[str, dict[str, int]] = {
    "deit_tiny": {"d_model": 192, "n_heads": 3, "d_ff": 768, "depth": 12, "patch_size": 16},
    "vit": {"d_model": 768, "n_heads": 12, "d_ff": 3072, "depth": 12, "patch_size": 16},
}


@lru_cache(maxsize=1)
def _registry_index() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for spec in REGISTRY:
        for n in (spec.name, spec.chronos_name, *spec.aliases):
            out[_norm(n)] = spec
    return out


@lru_cache(maxsize=1)
def _timm_names() -> tuple[str, ...]:
    import timm

    return tuple(timm.list_models())


@lru_cache(maxsize=1)
def _tv_names() -> tuple[str, ...]:
    import torchvision

    return tuple(torchvision.models.list_models(module=torchvision.models))


@dataclass(frozen=True)
class ResolvedModel:
    """A model name resolved to its library: ``name`` (canonical), ``family``, ``source``."""

    name: str
    family: str
    source: str
    spec: ModelSpec | None = None
    library_name: str = ""


def _guess_family(name: str) -> str:
    n = name.lower()
    if any(k in n for k in ("vit", "deit", "swin", "beit", "eva", "xcit", "cait", "levit", "pit_", "tnt")):
        return "Transformer"
    if any(k in n for k in ("mixer", "resmlp", "gmlp", "mlp")):
        return "MLP"
    return "CNN"


def resolve_model(name: str) -> ResolvedModel:
    """Resolve ``name`` (see module doc); :class:`UnknownNameError` with close matches if unknown."""
    raw = str(name).strip()
    prefix, _, rest = raw.partition("/")
    if rest and prefix.lower() in ("timm", "torchvision", "tv"):
        lib, key = ("timm" if prefix.lower() == "timm" else "torchvision"), rest
    else:
        lib, key = "", raw
    reg = _registry_index().get(_norm(key))
    if reg is not None and not lib:
        return ResolvedModel(reg.name, reg.family, reg.source, reg)
    if lib in ("", "timm"):
        names = {n.lower(): n for n in _timm_names()}
        if key.lower() in names:
            real = names[key.lower()]
            return ResolvedModel(real, _guess_family(real), "timm", None, real)
    if lib in ("", "torchvision"):
        names = {n.lower(): n for n in _tv_names()}
        if key.lower() in names:
            real = names[key.lower()]
            return ResolvedModel(real, _guess_family(real), "torchvision", None, real)
    import difflib

    registry = sorted({s.name for s in REGISTRY} | {s.chronos_name for s in REGISTRY})
    pool = sorted(set(registry) | set(_timm_names()) | set(_tv_names()))
    close = difflib.get_close_matches(key, pool, n=3, cutoff=0.6)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    raise UnknownNameError(f"unknown model {raw!r}{hint} (registry: {', '.join(s.name for s in REGISTRY)}; "
                           "or any timm / torchvision image model name)")


def model_family(name: str) -> str:
    """CHRONOS family (CNN, MLP, Transformer) of a model name."""
    return resolve_model(name).family


def model_img_px(name: str, dataset_img_px: int) -> int:
    """Input size the model is trained at: 224 for the CHRONOS Transformers, else the dataset's."""
    r = resolve_model(name)
    if r.spec is not None and r.spec.fixed_img_px:
        return r.spec.fixed_img_px
    return dataset_img_px


def create_model(name: str, num_classes: int, img_px: int = 32, **kwargs: Any) -> Any:
    """Build an untrained ``torch.nn.Module`` classifying ``num_classes`` from ``img_px`` x ``img_px``
    RGB images. ``kwargs`` go to the builder (e.g. ``embed_dim=256`` for the CHRONOS MLPs). Build
    under ``with torch.device('meta'):`` for shape/FLOP analysis without memory. A builder refusing
    ``kwargs`` raises :class:`~traintime.core.errors.ArgumentError` naming them."""
    if kwargs:
        try:
            return _create_model(name, num_classes, img_px, **kwargs)
        except (TypeError, ValueError, RuntimeError, AssertionError, ZeroDivisionError) as exc:
            from traintime.core.errors import ArgumentError

            shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            raise ArgumentError(f"--model-arg {shown}: model {name!r} cannot be built with these arguments "
                                f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None
    return _create_model(name, num_classes, img_px)


def _create_model(name: str, num_classes: int, img_px: int = 32, **kwargs: Any) -> Any:
    r = resolve_model(name)
    if r.spec is not None:
        return r.spec.builder(num_classes=num_classes, img_px=img_px, **kwargs)
    if r.source == "timm":
        import timm

        try:
            return timm.create_model(r.library_name, pretrained=False, num_classes=num_classes,
                                     img_size=img_px, **kwargs)
        except TypeError:
            return timm.create_model(r.library_name, pretrained=False, num_classes=num_classes, **kwargs)
    import torchvision

    return torchvision.models.get_model(r.library_name, weights=None, num_classes=num_classes, **kwargs)


def infer_arch(model: nn.Module) -> dict[str, Any]:
    """Architecture descriptors of a timm ViT-like or Mixer-like model read from its modules
    (Transformer: d_model, n_heads, d_ff, depth, patch_size, seq_len; MLP: embed_dim, depth,
    patch_size, token/channel MLP widths, num_patches). Empty when the layout is not recognised."""
    blocks = getattr(model, "blocks", None)
    if blocks is None or len(blocks) == 0:
        return {}
    b0 = blocks[0]
    pe = getattr(model, "patch_embed", None) or getattr(model, "stem", None)
    patch = getattr(pe, "patch_size", None)
    patch = int(patch[0] if isinstance(patch, (tuple, list)) else patch) if patch is not None else None
    n_patches = getattr(pe, "num_patches", None)
    attn, mlp = getattr(b0, "attn", None), getattr(b0, "mlp", None)
    if attn is not None and hasattr(attn, "num_heads") and mlp is not None and hasattr(mlp, "fc1"):
        d = int(mlp.fc1.in_features)
        out = {"d_model": d, "n_heads": int(attn.num_heads), "d_ff": int(mlp.fc1.out_features),
               "depth": len(blocks)}
        if patch and n_patches:
            out.update(patch_size=patch, seq_len=int(n_patches))
        return out if len(out) == 6 else {}
    tok, ch = getattr(b0, "mlp_tokens", None), getattr(b0, "mlp_channels", None)
    lin_tok = getattr(b0, "linear_tokens", None)
    if ch is not None and hasattr(ch, "fc1") and patch and n_patches:
        d = int(ch.fc1.in_features)
        token_dim = int(tok.fc1.out_features) if tok is not None and hasattr(tok, "fc1") else int(n_patches)
        if tok is None and lin_tok is None:
            return {}
        return {"embed_dim": d, "depth": len(blocks), "patch_size": patch, "token_mlp_dim": token_dim,
                "channel_mlp_dim": int(ch.fc1.out_features), "num_patches": int(n_patches)}
    return {}


def model_arch(name: str, img_px: int, **kwargs: Any) -> dict[str, Any]:
    """Architecture descriptors the released CSVs record for the model's family (MLP: embed_dim,
    depth, patch_size, token/channel MLP dims, num_patches; Transformer: d_model, n_heads, d_ff,
    depth, patch_size, seq_len). Empty for CNNs and unregistered models."""
    r = resolve_model(name)
    if r.family == "MLP" and r.spec is not None:
        c = mlp_config(r.name, img_px, kwargs.get("embed_dim", 128), kwargs.get("depth"), kwargs.get("patch_size"))
        return {"embed_dim": c.embed_dim, "depth": c.depth, "patch_size": c.patch_size,
                "token_mlp_dim": c.token_mlp_dim, "channel_mlp_dim": c.channel_mlp_dim,
                "num_patches": c.num_patches}
    if r.name in TRANSFORMER_DIMS:
        d = dict(TRANSFORMER_DIMS[r.name])
        d["seq_len"] = (img_px // d["patch_size"]) ** 2
        return d
    if r.spec is None and r.family in ("MLP", "Transformer"):
        with torch.device("meta"):
            arch = infer_arch(create_model(name, 10, img_px, **kwargs))
        wanted = "d_model" if r.family == "Transformer" else "embed_dim"
        return arch if wanted in arch else {}
    return {}


