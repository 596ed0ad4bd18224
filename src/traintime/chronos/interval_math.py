"""Interval arithmetic shared by the conformal routines and ``traintime predict`` (numpy-free, so the fast
``--no-probe`` path does not import scikit-learn)."""

from __future__ import annotations

import math


def combine_log_halfwidths(*halfwidths: float) -> float:
    """Half-width of a product of independent multiplicative errors (log-scale, in quadrature)."""
    hs = [h for h in halfwidths if h == h]
    return float(math.sqrt(sum(h * h for h in hs))) if hs else float("nan")


def seed_floored_halfwidth(residual_halfwidth: float, seed_halfwidth: float) -> float:
    """Log half-width of an epoch interval for one new run from residuals that already hold seed noise.

    Residuals of single-seed labels (the released CHRONOS runs, one seed each) are model error plus one
    draw of seed noise: in quadrature ``h^2 = h_model^2 + h_seed^2``. Adding the seed spread again counts
    it twice. Taking the model part out and putting the seed part back gives
    ``sqrt(max(h^2 - h_seed^2, 0) + h_seed^2) = max(h, h_seed)``: the residual interval, never narrower
    than the seed spread alone. A NaN ``seed_halfwidth`` (no multi-seed data) leaves ``h`` unchanged.
    """
    if math.isnan(seed_halfwidth) or math.isnan(residual_halfwidth):
        return float(residual_halfwidth)
    return float(max(residual_halfwidth, seed_halfwidth))
