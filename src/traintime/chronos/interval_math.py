"""Interval arithmetic shared by the conformal routines and ``traintime predict`` (numpy-free, so the fast
``--no-probe`` path does not import scikit-learn)."""

from __future__ import annotations

import math


def combine_log_halfwidths(*halfwidths: float) -> float:
    """Half-width of a product of independent multiplicative errors (log-scale, in quadrature)."""
    hs = [h for h in halfwidths if h == h]
    return float(math.sqrt(sum(h * h for h in hs))) if hs else float("nan")
