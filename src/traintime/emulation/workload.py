"""The zero-shot paper's training-step workload, reproduced exactly.

One workload = (timm model name, square input size ``img_px``, ``batch_size``, ``precision``):

- ``timm.create_model(name, pretrained=False, num_classes=16, img_size=img_px)``; when the model's
  constructor rejects ``img_size`` (a ``TypeError``), the same call without it. ``pretrained=False``:
  no network access, ever.
- ``.train()``; SGD (lr 0.01, momentum 0.9); cross-entropy loss.
- One fixed random batch on the device: ``randn(B, 3, s, s)`` and labels ``randint(0, 16, (B,))``.
  A captured CUDA graph replays fixed addresses, so the batch never moves.
- One step: ``zero_grad(set_to_none=False)`` (gradient buffers keep their addresses), forward and
  loss under ``torch.autocast`` for fp16/bf16 (no GradScaler: its host sync cannot be captured),
  backward, optimizer step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from traintime.core.errors import ConfigError, unknown_name
from traintime.emulation.schema import PRECISIONS

NUM_CLASSES = 16
LR = 0.01
MOMENTUM = 0.9


@dataclass(frozen=True)
class WorkloadSpec:
    """One training-step workload. ``img_px``: input height = width (pixels)."""

    model: str
    img_px: int
    batch_size: int
    precision: str = "fp32"

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"workload {self.model}: precision {self.precision!r} is not one of "
                              f"{', '.join(PRECISIONS)}")
        if int(self.img_px) < 1 or int(self.batch_size) < 1:
            raise ConfigError(f"workload {self.model}: img_px and batch_size must be positive "
                              f"(got {self.img_px}, {self.batch_size})")

    def key(self) -> dict[str, Any]:
        return {"model": self.model, "img_px": int(self.img_px), "batch_size": int(self.batch_size),
                "precision": self.precision}


@lru_cache(maxsize=1)
def _timm_names() -> tuple[str, ...]:
    import timm

    return tuple(timm.list_models())


def check_model_name(name: str) -> None:
    """Raise :class:`~traintime.core.errors.UnknownNameError` (with close matches) for an unknown timm name."""
    import timm

    if not timm.is_model(name):
        raise unknown_name("timm model", name, _timm_names())


def build_model(name: str, img_px: int, num_classes: int = NUM_CLASSES) -> Any:
    """``timm.create_model`` as the paper calls it (random weights, ``img_size`` when accepted)."""
    import timm

    check_model_name(name)
    try:
        return timm.create_model(name, pretrained=False, num_classes=num_classes, img_size=img_px)
    except TypeError:
        # the model's constructor has no img_size argument (most CNNs): same call without it
        return timm.create_model(name, pretrained=False, num_classes=num_classes)


def autocast_dtype(precision: str) -> Any:
    """torch dtype for autocast, or None for fp32 (no autocast)."""
    import torch

    return {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}[precision]


class TrainStep:
    """A callable running one SGD training step of ``spec`` on ``device``.

    Attributes: ``model``, ``optimizer``, ``criterion``, ``x`` (B, 3, s, s), ``y`` (B,).
    """

    def __init__(self, spec: WorkloadSpec, device: Any = "cpu", seed: int | None = 0) -> None:
        import torch

        self.spec = spec
        self.device = torch.device(device)
        if seed is not None:
            torch.manual_seed(seed)
        self.model = build_model(spec.model, int(spec.img_px)).to(self.device).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=LR, momentum=MOMENTUM)
        self.criterion = torch.nn.CrossEntropyLoss()
        self.amp_dtype = autocast_dtype(spec.precision)
        b, s = int(spec.batch_size), int(spec.img_px)
        self.x = torch.randn(b, 3, s, s, device=self.device)
        self.y = torch.randint(0, NUM_CLASSES, (b,), device=self.device)

    def __call__(self) -> None:
        import torch

        self.optimizer.zero_grad(set_to_none=False)
        if self.amp_dtype is not None:
            with torch.autocast(self.device.type, dtype=self.amp_dtype):
                loss = self.criterion(self.model(self.x), self.y)
        else:
            loss = self.criterion(self.model(self.x), self.y)
        loss.backward()
        self.optimizer.step()

    def release(self) -> None:
        """Drop every tensor this step holds (before ``torch.cuda.empty_cache``)."""
        for attr in ("model", "optimizer", "criterion", "x", "y"):
            if hasattr(self, attr):
                delattr(self, attr)


def make_workload(spec: WorkloadSpec, device: Any = "cpu", seed: int | None = 0) -> TrainStep:
    """Build the model, optimizer and fixed batch of ``spec`` on ``device``."""
    return TrainStep(spec, device=device, seed=seed)
