"""Shared plotting helpers: Agg backend, 150-dpi PNG written atomically, labelled axes.

Figure functions of a stage take DataFrames and a path; these helpers keep the look consistent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from traintime.core.io import atomic_path  # noqa: E402

DPI = 150
#: one colour per model family, reused by every figure
FAMILY_COLORS: dict[str, str] = {"CNN": "#1f77b4", "MLP": "#2ca02c", "Transformer": "#d62728"}
SERIES_COLORS: tuple[str, ...] = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#7f7f7f")


def new_figure(nrows: int = 1, ncols: int = 1, width: float = 5.0, height: float = 4.0,
               **kwargs: Any) -> tuple[Any, np.ndarray]:
    """A figure with an array of axes (always 2-D: ``axes[r, c]``)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
    return fig, axes


def savefig(fig: Any, path: str | os.PathLike[str]) -> None:
    """Save ``fig`` as a 150-dpi PNG atomically and close it. PNG metadata carries no timestamp."""
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=DPI, format="png", metadata={"Software": None})
    plt.close(fig)


def loglog_scatter(ax: Any, measured: np.ndarray, predicted: np.ndarray, colors: Sequence[str] | str,
                   labels: Mapping[str, str] | None = None, unit: str = "ms", title: str = "",
                   size: float = 4.0) -> None:
    """Predicted vs measured on log-log axes with the identity and +-2x lines.

    ``colors`` per point (or one colour); ``labels`` maps colour -> legend label.
    """
    m = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    ok = (m > 0) & (p > 0)
    ax.scatter(m[ok], p[ok], s=size, c=np.asarray(colors)[ok] if not isinstance(colors, str) else colors,
               alpha=0.5, linewidths=0)
    if ok.any():
        lo = float(min(m[ok].min(), p[ok].min())) / 1.5
        hi = float(max(m[ok].max(), p[ok].max())) * 1.5
        xs = np.array([lo, hi])
        ax.plot(xs, xs, color="black", lw=0.8, label="y = x")
        ax.plot(xs, 2 * xs, color="grey", lw=0.6, ls="--", label="x2 / x0.5")
        ax.plot(xs, xs / 2, color="grey", lw=0.6, ls="--")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    if labels:
        for color, label in labels.items():
            ax.scatter([], [], c=color, s=12, label=label)
    ax.legend(fontsize=7, loc="upper left")
    if title:
        ax.set_title(title, fontsize=9)
    ax.grid(True, which="major", lw=0.3, alpha=0.5)


def grouped_bars(ax: Any, categories: Sequence[str], series: Mapping[str, Sequence[float]],
                 errors: Mapping[str, Sequence[float]] | None = None, ylabel: str = "", title: str = "",
                 log: bool = False) -> None:
    """Side-by-side bars: one group per category, one bar per series, optional +-error bars."""
    n = max(1, len(series))
    width = 0.8 / n
    x = np.arange(len(categories))
    for i, (name, vals) in enumerate(series.items()):
        err = None if errors is None or name not in errors else np.asarray(errors[name], dtype=float)
        ax.bar(x + (i - (n - 1) / 2) * width, np.asarray(vals, dtype=float), width, yerr=err, capsize=2,
               label=name, color=SERIES_COLORS[i % len(SERIES_COLORS)], error_kw={"lw": 0.8})
    ax.set_xticks(x)
    ax.set_xticklabels(categories, rotation=60, ha="right", fontsize=7)
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", lw=0.3, alpha=0.5)
