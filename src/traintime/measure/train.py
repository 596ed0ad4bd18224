"""Training to convergence with validation-based early stopping (the CHRONOS convergence label).

Protocol (paper, "Reproducing the experiments"): the training split is divided 80/20 into train
and validation (seeded); after each epoch the mean validation cross-entropy is computed; an epoch
*improves* when its validation loss is below the best so far by more than ``min_delta``
(default 5e-4); training stops when ``patience`` (default 7) consecutive epochs did not improve,
or at ``max_epochs``.

Labels recorded (see :class:`EarlyStopping`):

``epochs_to_converge`` (T_conv)
    the epoch at which early stopping fired (epochs trained). The released CNN data is consistent
    with this reading: its smallest T_conv is 8 = patience 7 + 1.
``best_epoch``
    the last improving epoch (= T_conv - patience when converged).
``status``
    ``converged`` (patience exhausted), ``max_epochs`` (cap reached first: T_conv is censored) or
    ``diverged`` (a non-finite training or validation loss).

:class:`EarlyStopping` is pure (no torch) so its logic is testable on scripted loss curves.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

STATUSES: tuple[str, ...] = ("running", "converged", "max_epochs", "diverged")


class EarlyStopping:
    """Validation-loss early stopping. Call :meth:`update` once per epoch; it returns True to stop.

    Parameters
    ----------
    min_delta : an improvement must lower the best validation loss by more than this (absolute).
    patience : epochs without improvement before stopping.
    max_epochs : hard cap on epochs.
    """

    def __init__(self, min_delta: float = 5e-4, patience: int = 7, max_epochs: int = 200) -> None:
        if patience < 1 or max_epochs < 1 or min_delta < 0:
            raise ValueError("need patience >= 1, max_epochs >= 1, min_delta >= 0")
        self.min_delta = float(min_delta)
        self.patience = int(patience)
        self.max_epochs = int(max_epochs)
        self.best = math.inf
        self.best_epoch = 0
        self.epoch = 0
        self.wait = 0
        self.status = "running"
        self.history: list[float] = []

    @property
    def stopped(self) -> bool:
        return self.status != "running"

    def update(self, value: float) -> bool:
        """Record the validation loss of the next epoch; True when training must stop."""
        if self.stopped:
            raise RuntimeError(f"early stopping already ended ({self.status})")
        self.epoch += 1
        v = float(value)
        self.history.append(v)
        if not math.isfinite(v):
            self.status = "diverged"
            return True
        if v < self.best - self.min_delta:
            self.best, self.best_epoch, self.wait = v, self.epoch, 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.status = "converged"
                return True
        if self.epoch >= self.max_epochs:
            self.status = "max_epochs"
            return True
        return False

    @classmethod
    def replay(cls, curve: Sequence[float], **kwargs: Any) -> "EarlyStopping":
        """Run the rule over a whole validation-loss curve (stops where training would have)."""
        es = cls(**kwargs)
        for v in curve:
            if es.update(v):
                break
        return es


@dataclass
class ConvergenceResult:
    """One training run: labels, curves (per epoch) and wall time (s)."""

    status: str
    epochs_to_converge: int
    best_epoch: int
    best_val_loss: float
    val_loss: list[float]
    val_accuracy: list[float]
    train_loss: list[float]
    wall_time_s: float
    epoch_time_s: list[float] = field(default_factory=list)
    message: str = ""


def split_indices(n: int, val_fraction: float = 0.2, seed: int = 42) -> tuple[list[int], list[int]]:
    """Seeded random train/validation split of ``n`` indices (validation = round(val_fraction n))."""
    import torch

    n_val = int(round(val_fraction * n))
    if n_val < 1 or n_val >= n:
        raise ValueError(f"cannot split {n} samples with validation fraction {val_fraction}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    return perm[n_val:], perm[:n_val]


def train_to_convergence(model: Any, dataset: Any, optimizer: str = "sgd", learning_rate: float = 0.01,
                         batch_size: int = 64, device: Any = "cpu", precision_bits: int = 32,
                         min_delta: float = 5e-4, patience: int = 7, max_epochs: int = 200,
                         val_fraction: float = 0.2, seed: int = 42, weight_decay: float = 1e-4,
                         num_workers: int = 0, time_limit_s: float | None = None) -> ConvergenceResult:
    """Train ``model`` on ``dataset`` (80/20 split) until :class:`EarlyStopping` stops it.

    Deterministic on the CPU for a given ``seed`` (seeded split, shuffling and initialisation by the
    caller; deterministic algorithms requested). ``time_limit_s`` ends a run early with status
    ``max_epochs`` (censored) and a message; the default has no limit.
    """
    import torch

    from traintime.measure.timing import resolve_device

    dev = resolve_device(device) if isinstance(device, str) else device
    torch.manual_seed(seed)
    was_deterministic = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        return _train(model, dataset, optimizer, learning_rate, batch_size, dev, precision_bits, min_delta,
                      patience, max_epochs, val_fraction, seed, weight_decay, num_workers, time_limit_s)
    finally:
        torch.use_deterministic_algorithms(was_deterministic)


def _train(model: Any, dataset: Any, optimizer: str, learning_rate: float, batch_size: int, dev: Any,
           precision_bits: int, min_delta: float, patience: int, max_epochs: int, val_fraction: float,
           seed: int, weight_decay: float, num_workers: int, time_limit_s: float | None) -> ConvergenceResult:
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Subset

    from traintime.measure.timing import (
        autocast_context,
        backward_and_step,
        build_optimizer,
        grad_scaler,
    )

    tr_idx, va_idx = split_indices(len(dataset), val_fraction, seed)
    gen = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(Subset(dataset, tr_idx), batch_size=batch_size, shuffle=True, generator=gen,
                              num_workers=num_workers, drop_last=False)
    val_loader = DataLoader(Subset(dataset, va_idx), batch_size=max(batch_size, 256), shuffle=False,
                            num_workers=num_workers)
    model = model.to(dev)
    opt = build_optimizer(optimizer, model.parameters(), learning_rate, weight_decay)
    scaler = grad_scaler(dev, precision_bits)
    crit = nn.CrossEntropyLoss()
    es = EarlyStopping(min_delta=min_delta, patience=patience, max_epochs=max_epochs)
    train_curve: list[float] = []
    val_acc: list[float] = []
    epoch_times: list[float] = []
    message = ""
    t_start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        model.train()
        total, count, finite = 0.0, 0, True
        for xb, yb in train_loader:
            xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True).long()
            opt.zero_grad(set_to_none=True)
            with autocast_context(dev, precision_bits):
                loss = crit(model(xb), yb)
            if not torch.isfinite(loss):
                finite = False
                break
            backward_and_step(loss, opt, scaler)
            total += float(loss.item()) * len(yb)
            count += len(yb)
        train_curve.append(total / max(1, count) if finite else float("nan"))
        if finite:
            model.eval()
            vl, correct, n = 0.0, 0, 0
            with torch.no_grad():
                for xb, yb in val_loader:
                    xb, yb = xb.to(dev), yb.to(dev).long()
                    with autocast_context(dev, precision_bits):
                        out = model(xb)
                    vl += float(crit(out.float(), yb).item()) * len(yb)
                    correct += int((out.argmax(1) == yb).sum())
                    n += len(yb)
            val, acc = vl / n, correct / n
        else:
            val, acc = float("nan"), float("nan")
            message = f"non-finite training loss in epoch {es.epoch + 1}"
        val_acc.append(acc)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        epoch_times.append(time.perf_counter() - t0)
        if es.update(val):
            if es.status == "diverged" and not message:
                message = f"non-finite validation loss in epoch {es.epoch}"
            break
        if time_limit_s is not None and time.perf_counter() - t_start > time_limit_s:
            es.status = "max_epochs"
            message = f"time limit of {time_limit_s:g} s reached after {es.epoch} epochs (censored)"
            break
    wall = time.perf_counter() - t_start
    return ConvergenceResult(status=es.status, epochs_to_converge=es.epoch, best_epoch=es.best_epoch,
                             best_val_loss=float(es.best) if np.isfinite(es.best) else float("nan"),
                             val_loss=list(es.history), val_accuracy=val_acc, train_loss=train_curve,
                             wall_time_s=wall, epoch_time_s=epoch_times, message=message)
