"""The one-batch probe z(c): initial loss, gradient norm and the empirical NTK trace at initialisation.

One forward and one backward pass on one mini-batch of the freshly initialised model; no optimizer
step. The model is in eval mode (batch norm uses its initial running statistics), as in the released
CHRONOS probe (``chronos/cnn_probe.py``).

Quantities (``L`` = mean cross-entropy of the batch, ``g = dL/dtheta`` over trainable parameters):

``initial_loss``, ``grad_norm`` (= ``||g||``)
    and the released code's features ``initial_loss_log10 = log10(L + 1e-8)``,
    ``gradient_norm_log10 = log10(||g|| + 1e-8)`` and ``ntk_trace_proxy_log10 = log10(||g||^2 + 1e-8)``.
    The last one is what CHRONOS calls its NTK trace; it is exactly twice the gradient-norm feature.

``ntk_trace`` (normalised empirical NTK trace)
    ``tau = 1 / (n K) * sum_i sum_k ||d f_k(x_i) / d theta||^2`` for ``n`` samples and ``K``
    logits: the mean diagonal entry of the empirical NTK ``Theta(x, x) = J J^T``
    (``J``: the (n K) x P Jacobian of the logits). Two ways to compute it:

    * ``exact``: per-sample Jacobians with ``torch.func`` (``vmap`` over samples of ``jacrev``),
      summed in chunks so at most ``max_jacobian_elements`` floats are alive; cost ~ K backward
      passes per sample. Used by ``auto`` when K x P is small.
    * ``hutchinson``: for Rademacher vectors ``v_i`` in {-1, +1}^K,
      ``E ||J_i^T v_i||^2 = tr(J_i J_i^T)`` (``E[v v^T] = I``), so one per-sample vector-Jacobian
      product per sample and projection gives an unbiased estimate. Per-sample VJPs run with
      ``vmap(grad(.))`` in chunks; averaged over samples and ``n_projections`` projections, with
      the standard error of the mean over projections reported (``ntk_trace_se``).
    * ``hutchinson_batch``: one Rademacher vector over all n x K logits and one ordinary backward
      pass per projection, ``E ||J^T v||^2 = tr(J J^T)``; unbiased too but with cross-sample terms
      in its variance. Fallback when a model cannot run under ``vmap``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn
from torch.func import functional_call, grad, jacrev, vmap

#: ``auto`` uses the exact trace when logits x parameters is at most this.
EXACT_MAX_JACOBIAN = 2e7


@dataclass
class ProbeResult:
    """Probe of one mini-batch. Times in seconds; ``ntk_trace`` normalised by samples x logits."""

    initial_loss: float
    grad_norm: float
    ntk_trace: float
    ntk_trace_se: float
    ntk_method: str
    ntk_projections: int
    probe_batch_size: int
    num_outputs: int
    param_count: int
    probe_time_s: float
    ntk_time_s: float

    @property
    def initial_loss_log10(self) -> float:
        return math.log10(self.initial_loss + 1e-8)

    @property
    def gradient_norm_log10(self) -> float:
        return math.log10(self.grad_norm + 1e-8)

    @property
    def ntk_trace_proxy_log10(self) -> float:
        """The released code's "NTK trace": log10(||g||^2 + 1e-8)."""
        return math.log10(self.grad_norm ** 2 + 1e-8)

    @property
    def ntk_trace_log10(self) -> float:
        return math.log10(self.ntk_trace) if self.ntk_trace > 0 else float("nan")

    def features(self) -> dict[str, Any]:
        """All fields plus the log10 features, as one flat dict (a row)."""
        out = asdict(self)
        out.update(initial_loss_log10=self.initial_loss_log10, gradient_norm_log10=self.gradient_norm_log10,
                   ntk_trace_proxy_log10=self.ntk_trace_proxy_log10, ntk_trace_log10=self.ntk_trace_log10)
        return out


def _params(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    params = {k: v.detach() for k, v in model.named_parameters() if v.requires_grad}
    frozen = {k: v.detach() for k, v in model.named_parameters() if not v.requires_grad}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    return params, {**frozen, **buffers}


def _single_logits(model: nn.Module, params: dict[str, torch.Tensor], rest: dict[str, torch.Tensor],
                   x: torch.Tensor) -> torch.Tensor:
    """Logits (K,) of one sample x (C, H, W) as a function of ``params``."""
    return functional_call(model, {**params, **rest}, (x.unsqueeze(0),)).squeeze(0)


def ntk_trace_exact(model: nn.Module, x: torch.Tensor, max_jacobian_elements: float = 5e7) -> float:
    """Exact normalised NTK trace (see module doc) with per-sample Jacobians (torch.func)."""
    params, rest = _params(model)
    n_params = sum(p.numel() for p in params.values())
    with torch.no_grad():
        k = int(model(x[:1]).shape[-1])
    chunk = max(1, int(max_jacobian_elements // max(1, k * n_params)))
    jac_fn = vmap(jacrev(lambda p, xi: _single_logits(model, p, rest, xi)), in_dims=(None, 0))
    total = 0.0
    for start in range(0, x.shape[0], chunk):
        jac = jac_fn(params, x[start:start + chunk])
        total += float(sum(j.double().pow(2).sum() for j in jac.values()))
    return total / (x.shape[0] * k)


def ntk_trace_hutchinson(model: nn.Module, x: torch.Tensor, n_projections: int = 8, seed: int = 0,
                         max_grad_elements: float = 5e7) -> tuple[float, float]:
    """Per-sample Rademacher estimate of the normalised NTK trace and its standard error."""
    params, rest = _params(model)
    n_params = sum(p.numel() for p in params.values())
    with torch.no_grad():
        k = int(model(x[:1]).shape[-1])
    gen = torch.Generator(device="cpu").manual_seed(seed)
    chunk = max(1, int(max_grad_elements // max(1, n_params)))

    def proj(p: dict[str, torch.Tensor], xi: torch.Tensor, vi: torch.Tensor) -> torch.Tensor:
        return (_single_logits(model, p, rest, xi) * vi).sum()

    vjp_fn = vmap(grad(proj), in_dims=(None, 0, 0))
    estimates = []
    for _ in range(n_projections):
        v = (torch.randint(0, 2, (x.shape[0], k), generator=gen) * 2 - 1).to(x.device, x.dtype)
        total = 0.0
        for start in range(0, x.shape[0], chunk):
            g = vjp_fn(params, x[start:start + chunk], v[start:start + chunk])
            total += float(sum(t.double().pow(2).sum() for t in g.values()))
        estimates.append(total / (x.shape[0] * k))
    return _mean_se(estimates)


def ntk_trace_hutchinson_batch(model: nn.Module, x: torch.Tensor, n_projections: int = 8,
                               seed: int = 0) -> tuple[float, float]:
    """Whole-batch Rademacher estimate (one backward pass per projection) and its standard error."""
    params = [p for p in model.parameters() if p.requires_grad]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    logits = model(x)
    n, k = logits.shape
    estimates = []
    for r in range(n_projections):
        v = (torch.randint(0, 2, (n, k), generator=gen) * 2 - 1).to(logits.device, logits.dtype)
        gs = torch.autograd.grad((logits * v).sum(), params, retain_graph=r < n_projections - 1,
                                 allow_unused=True)
        estimates.append(float(sum(g.double().pow(2).sum() for g in gs if g is not None)) / (n * k))
    return _mean_se(estimates)


def _mean_se(values: list[float]) -> tuple[float, float]:
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, float("nan")
    var = sum((v - m) ** 2 for v in values) / (len(values) - 1)
    return m, math.sqrt(var / len(values))


def probe(model: nn.Module, x: torch.Tensor, y: torch.Tensor, ntk: str = "auto", n_projections: int = 8,
          seed: int = 0, max_elements: float | None = None) -> ProbeResult:
    """Probe ``model`` at initialisation on the batch ``(x, y)`` (both on the model's device).

    ``ntk``: ``exact``, ``hutchinson``, ``hutchinson_batch``, ``auto`` (exact when logits x
    parameters <= :data:`EXACT_MAX_JACOBIAN`, else ``hutchinson``; ``hutchinson_batch`` if the model
    cannot be vmapped) or ``none`` (skip the trace: NaN). Parameters are not changed.
    ``max_elements``: floats of per-sample Jacobians / gradients alive at once (chunking); default
    5e7 on the CPU, 5e8 on a GPU.
    """
    if max_elements is None:
        max_elements = 5e8 if x.is_cuda else 5e7
    model.eval()
    params = [p for p in model.parameters() if p.requires_grad]
    n_params = sum(p.numel() for p in params)
    sync = torch.cuda.synchronize if x.is_cuda else (lambda: None)
    sync()
    t0 = time.perf_counter()
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.float(), y.long())
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    gsq = float(sum(g.double().pow(2).sum() for g in grads if g is not None))
    sync()
    t_probe = time.perf_counter() - t0
    k = int(logits.shape[-1])
    del logits, grads
    method = ntk
    if ntk == "auto":
        method = "exact" if k * n_params <= EXACT_MAX_JACOBIAN else "hutchinson"
    t1 = time.perf_counter()
    se, projections = 0.0, 0
    if method == "none":
        trace, se = float("nan"), float("nan")
    elif method in ("exact", "hutchinson"):
        try:
            if method == "exact":
                trace = ntk_trace_exact(model, x, max_jacobian_elements=max_elements)
            else:
                projections = n_projections
                trace, se = ntk_trace_hutchinson(model, x, n_projections, seed, max_grad_elements=max_elements)
        except (RuntimeError, NotImplementedError):
            if ntk != "auto":  # an explicit request must not change method silently
                raise
            method, projections = "hutchinson_batch", n_projections
            trace, se = ntk_trace_hutchinson_batch(model, x, n_projections, seed)
    elif method == "hutchinson_batch":
        projections = n_projections
        trace, se = ntk_trace_hutchinson_batch(model, x, n_projections, seed)
    else:
        raise ValueError(f"unknown NTK method {ntk!r} (exact, hutchinson, hutchinson_batch, auto, none)")
    sync()
    t_ntk = time.perf_counter() - t1
    return ProbeResult(initial_loss=float(loss.item()), grad_norm=math.sqrt(gsq), ntk_trace=float(trace),
                       ntk_trace_se=float(se), ntk_method=method, ntk_projections=projections,
                       probe_batch_size=int(x.shape[0]), num_outputs=k, param_count=int(n_params),
                       probe_time_s=t_probe, ntk_time_s=t_ntk)


def probe_batch(dataset: Any, batch_size: int, seed: int = 42) -> tuple[torch.Tensor, torch.Tensor]:
    """The first shuffled mini-batch of ``dataset`` (seeded), as the released probe draws it."""
    from torch.utils.data import DataLoader

    g = torch.Generator().manual_seed(seed)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, generator=g, num_workers=0)
    x, y = next(iter(loader))
    return x, y
