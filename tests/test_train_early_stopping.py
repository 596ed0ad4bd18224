"""Early stopping on scripted validation-loss curves, and a tiny deterministic training run."""

from __future__ import annotations

import math

import pytest
import torch

from traintime.measure.train import EarlyStopping, split_indices, train_to_convergence


def test_converged_when_patience_exhausted() -> None:
    curve = [1.0, 0.8, 0.7, 0.7002, 0.6999, 0.71, 0.72, 0.5]
    es = EarlyStopping.replay(curve, min_delta=5e-4, patience=3, max_epochs=100)
    # epochs 4-6 do not improve by more than 5e-4 on 0.7 (0.6999 is only 1e-4 better)
    assert es.status == "converged"
    assert es.epoch == 6 and es.best_epoch == 3 and es.best == pytest.approx(0.7)
    assert es.history == curve[:6]


def test_improvement_must_exceed_min_delta() -> None:
    es = EarlyStopping.replay([1.0, 0.9995, 0.999, 0.9991, 0.5], min_delta=1e-3, patience=3)
    assert es.status == "converged" and es.best_epoch == 1
    es = EarlyStopping.replay([1.0, 0.9985, 0.997, 0.9955], min_delta=1e-3, patience=3, max_epochs=4)
    assert es.status == "max_epochs" and es.best_epoch == 4


def test_max_epochs_when_still_improving() -> None:
    es = EarlyStopping.replay([1.0 / (i + 1) for i in range(20)], patience=7, max_epochs=10)
    assert es.status == "max_epochs" and es.epoch == 10 and es.best_epoch == 10


def test_diverged_on_nan_or_inf() -> None:
    es = EarlyStopping.replay([1.0, 0.5, float("nan"), 0.1], patience=7)
    assert es.status == "diverged" and es.epoch == 3 and es.best_epoch == 2
    assert EarlyStopping.replay([float("inf")]).status == "diverged"


def test_update_after_stop_and_bad_arguments() -> None:
    es = EarlyStopping.replay([1.0, 1.0], patience=1)
    assert es.stopped
    with pytest.raises(RuntimeError):
        es.update(0.5)
    with pytest.raises(ValueError):
        EarlyStopping(patience=0)


def test_split_is_seeded_and_disjoint() -> None:
    tr, va = split_indices(100, 0.2, seed=3)
    assert len(va) == 20 and len(tr) == 80 and not set(tr) & set(va)
    assert split_indices(100, 0.2, seed=3) == (tr, va)
    assert split_indices(100, 0.2, seed=4) != (tr, va)


def _data() -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (120,), generator=g)
    x = 0.5 * torch.randn(120, 3, 4, 4, generator=g)
    x[torch.arange(120), y] += 2.0  # class k lights up channel k
    return torch.utils.data.TensorDataset(x, y)


def _model() -> torch.nn.Module:
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))


def test_training_run_is_deterministic_and_stops() -> None:
    a = train_to_convergence(_model(), _data(), "sgd", 0.02, 16, "cpu", patience=2, max_epochs=30, seed=7)
    b = train_to_convergence(_model(), _data(), "sgd", 0.02, 16, "cpu", patience=2, max_epochs=30, seed=7)
    assert a.status in ("converged", "max_epochs")
    assert a.val_loss == b.val_loss and a.epochs_to_converge == b.epochs_to_converge
    assert len(a.val_loss) == a.epochs_to_converge == len(a.val_accuracy) == len(a.train_loss)
    assert a.val_loss[a.best_epoch - 1] == a.best_val_loss
    # no later epoch beat the best by more than min_delta (5e-4)
    assert min(a.val_loss[a.best_epoch:]) >= a.best_val_loss - 5e-4
    assert max(a.val_accuracy) > 0.9


def test_training_diverges_on_nan_loss() -> None:
    r = train_to_convergence(_model(), _data(), "sgd", 1e6, 16, "cpu", patience=2, max_epochs=30, seed=7)
    assert r.status == "diverged"
    assert "non-finite" in r.message
    assert math.isnan(r.val_loss[-1])
