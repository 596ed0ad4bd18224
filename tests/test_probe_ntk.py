"""The one-batch probe: NTK trace (exact and random-projection) against a brute-force Jacobian."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from traintime.measure.probe import (
    ntk_trace_exact,
    ntk_trace_hutchinson,
    ntk_trace_hutchinson_batch,
    probe,
    probe_batch,
)


def _tiny() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 5 * 5, 6), nn.Tanh(), nn.Linear(6, 5))
    model.eval()
    x = torch.randn(7, 3, 5, 5)
    y = torch.randint(0, 5, (7,))
    return model, x, y


def _brute_force_trace(model: nn.Module, x: torch.Tensor) -> float:
    """sum_i sum_k ||d f_k(x_i)/d theta||^2 / (n K), one autograd call per (sample, logit)."""
    params = [p for p in model.parameters() if p.requires_grad]
    total, n, k = 0.0, x.shape[0], None
    for i in range(n):
        out = model(x[i:i + 1])[0]
        k = out.shape[0]
        for j in range(k):
            gs = torch.autograd.grad(out[j], params, retain_graph=True)
            total += sum(float(g.double().pow(2).sum()) for g in gs)
    return total / (n * k)


def test_exact_trace_matches_brute_force() -> None:
    model, x, _ = _tiny()
    ref = _brute_force_trace(model, x)
    assert ntk_trace_exact(model, x) == pytest.approx(ref, rel=1e-5)
    # chunking (one sample per chunk) gives the same value
    assert ntk_trace_exact(model, x, max_jacobian_elements=1) == pytest.approx(ref, rel=1e-5)


def test_random_projection_estimates_are_unbiased_within_tolerance() -> None:
    model, x, _ = _tiny()
    ref = _brute_force_trace(model, x)
    est, se = ntk_trace_hutchinson(model, x, n_projections=60, seed=1)
    assert abs(est - ref) / ref < 0.08
    assert abs(est - ref) < 4 * se + 1e-9
    est_b, se_b = ntk_trace_hutchinson_batch(model, x, n_projections=300, seed=2)
    assert abs(est_b - ref) / ref < 0.15
    assert abs(est_b - ref) < 4 * se_b
    # a single projection is not the exact value (the estimator is random, not a disguised exact path)
    one, _ = ntk_trace_hutchinson_batch(model, x, n_projections=1, seed=3)
    assert one != pytest.approx(ref, rel=1e-6)


def test_probe_features_and_released_proxy() -> None:
    model, x, y = _tiny()
    before = [p.detach().clone() for p in model.parameters()]
    r = probe(model, x, y, ntk="auto")
    assert r.ntk_method == "exact"
    loss = nn.functional.cross_entropy(model(x), y)
    g = torch.autograd.grad(loss, list(model.parameters()))
    gnorm = math.sqrt(sum(float(t.pow(2).sum()) for t in g))
    assert r.initial_loss == pytest.approx(float(loss.detach()), rel=1e-6)
    assert r.grad_norm == pytest.approx(gnorm, rel=1e-5)
    f = r.features()
    # the released "NTK trace" is log10(||g||^2 + 1e-8) = 2 x log10(||g||) (up to the 1e-8)
    assert f["ntk_trace_proxy_log10"] == pytest.approx(math.log10(gnorm ** 2 + 1e-8), rel=1e-6)
    assert f["ntk_trace_proxy_log10"] == pytest.approx(2 * f["gradient_norm_log10"], abs=1e-6)
    assert f["ntk_trace_log10"] == pytest.approx(math.log10(_brute_force_trace(model, x)), rel=1e-5)
    # no optimizer step: parameters unchanged
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_probe_none_and_unknown_method() -> None:
    model, x, y = _tiny()
    assert math.isnan(probe(model, x, y, ntk="none").ntk_trace)
    with pytest.raises(ValueError):
        probe(model, x, y, ntk="bogus")


def test_probe_batch_is_seeded() -> None:
    ds = torch.utils.data.TensorDataset(torch.arange(100).float().view(100, 1), torch.arange(100))
    a, _ = probe_batch(ds, 8, seed=5)
    b, _ = probe_batch(ds, 8, seed=5)
    c, _ = probe_batch(ds, 8, seed=6)
    assert torch.equal(a, b) and not torch.equal(a, c)
