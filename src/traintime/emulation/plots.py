"""Figures of the zero-shot paper (matplotlib, Agg, PNG at 150 dpi).

Each function writes one PNG atomically. When the data a figure needs is absent (no host
measurements), :func:`placeholder` writes a figure that says so in words: no invented numbers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from traintime.core.io import atomic_path  # noqa: E402
from traintime.emulation.tables import method_label  # noqa: E402

DPI = 150


def _save(fig: plt.Figure, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def _text_panel(ax: plt.Axes, message: str) -> None:
    ax.set_axis_off()
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=10,
            bbox={"boxstyle": "round", "facecolor": "#f3f3f3", "edgecolor": "#999999"})


def placeholder(path: str | os.PathLike[str], title: str, message: str) -> None:
    """A figure holding only ``title`` and ``message`` (what is missing and how to get it)."""
    fig, ax = plt.subplots(figsize=(7, 3))
    ax.set_title(title)
    _text_panel(ax, message)
    _save(fig, path)


def figure2(traces: pd.DataFrame, points: pd.DataFrame, path: str | os.PathLike[str], specs: pd.DataFrame,
            model: str, img_px: int, batch_size: int, precision: str, generation_prefix: str = "RTX-30",
            no_host_message: str = "") -> None:
    """Latency vs SM count: left, real targets of one generation (public traces); right, the host
    under SM restriction at each locked clock (sweep), or a note when no sweep is present."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    wk = (traces["model"] == model) & (traces["img_px"] == img_px) & (traces["batch_size"] == batch_size) \
        & (traces["precision"] == precision) & traces["gpu"].str.startswith(generation_prefix)
    t = traces[wk].dropna(subset=["latency_ms"]).copy()
    sms = specs.set_index("gpu")["sms"]
    t["sms"] = t["gpu"].map(sms)
    t = t.sort_values("sms")
    ax1.plot(t["sms"], t["latency_ms"], marker="o")
    for r in t.itertuples(index=False):
        ax1.annotate(r.gpu.replace("RTX-", ""), (r.sms, r.latency_ms), fontsize=7, xytext=(3, 3),
                     textcoords="offset points")
    ax1.set_xlabel("target SM count")
    ax1.set_ylabel("training-step latency (ms)")
    ax1.set_title(f"Real {generation_prefix.replace('-', ' ')}xx GPUs (public traces)")
    if points.empty:
        _text_panel(ax2, no_host_message)
        ax2.set_title("Host under SM share and clock restriction")
    else:
        pw = points[(points["model"] == model) & (points["img_px"] == img_px) & (points["batch_size"] == batch_size)
                    & (points["precision"] == precision)]
        for f, g in pw.groupby("clock_mhz", sort=True):
            g = g.sort_values("p_pct")
            ax2.plot(g["p_pct"], g["latency_ms"], marker=".", label=f"{f:.0f} MHz")
        ax2.set_xlabel("SM share of the host (%)")
        ax2.set_ylabel("training-step latency (ms)")
        ax2.set_title(f"Host {', '.join(sorted(pw['host_gpu'].unique()))}")
        ax2.legend(fontsize=7)
    fig.suptitle(f"Latency vs SMs: {model}, {img_px}px, batch {batch_size}, {precision}")
    fig.tight_layout()
    _save(fig, path)


def figure3(grids: Sequence[tuple[str, str, pd.DataFrame, tuple[float, float] | None, tuple[float, float] | None]],
            path: str | os.PathLike[str], title: str) -> None:
    """Landscapes |log(t_host / t_target)| on (clock, SM share) grids.

    ``grids``: (target, model, grid from mapping.landscape, oracle (p, f) or None, spec-mapped
    (p, f) or None). One panel each, in rows of up to three.
    """
    n = len(grids)
    cols = min(3, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_axis_off()
    for ax, (gpu, model, grid, orc, spec) in zip(axes.flat, grids):
        x = grid.columns.to_numpy(dtype=float)
        y = grid.index.to_numpy(dtype=float)
        im = ax.pcolormesh(x, y, grid.to_numpy(dtype=float), shading="nearest", cmap="viridis")
        fig.colorbar(im, ax=ax, label="|log(t_host / t_target)|")
        if orc is not None:
            ax.plot(orc[1], orc[0], "x", color="red", ms=9, mew=2, label="oracle")
        if spec is not None:
            ax.plot(spec[1], spec[0], "x", color="orange", ms=9, mew=2, label="spec-mapped")
        ax.set_xlabel("host core clock (MHz)")
        ax.set_ylabel("SM share (%)")
        ax.set_title(f"{gpu}: {model}", fontsize=9)
        ax.legend(fontsize=6, loc="lower right")
    fig.suptitle(title)
    fig.tight_layout()
    _save(fig, path)


def _grouped_bars(ax: plt.Axes, table: pd.DataFrame, group: str, series: str, value: str,
                  groups: Sequence[str] | None = None, series_order: Sequence[str] | None = None,
                  labels: dict[str, str] | None = None) -> None:
    groups = list(groups) if groups is not None else list(pd.unique(table[group]))
    series_vals = list(series_order) if series_order is not None else list(pd.unique(table[series]))
    width = 0.8 / max(1, len(series_vals))
    x = np.arange(len(groups))
    for i, s in enumerate(series_vals):
        sub = table[table[series] == s].set_index(group)[value]
        ax.bar(x + (i - (len(series_vals) - 1) / 2) * width, [sub.get(g, np.nan) for g in groups], width,
               label=(labels or {}).get(s, str(s)))
    ax.set_xticks(x)
    ax.set_xticklabels([str(g) for g in groups], rotation=30, ha="right", fontsize=8)


def figure4(pred: pd.DataFrame, path: str | os.PathLike[str], targets: Sequence[str], models: Sequence[str],
            img_px: int, note: str = "") -> None:
    """Measured vs predicted step latency for a few models on a few targets, one panel per target."""
    sub = pred[pred["gpu"].isin(targets) & pred["model"].isin(models) & (pred["img_px"] == img_px)]
    n = len(targets)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.8), squeeze=False)
    for ax, gpu in zip(axes.flat, targets):
        g = sub[sub["gpu"] == gpu]
        if g.empty:
            _text_panel(ax, f"no predictions for {gpu}")
            continue
        meas = g.drop_duplicates("model")[["model", "latency_ms"]].assign(series="Target (measured)")
        meas = meas.rename(columns={"latency_ms": "ms"})
        pr = g.groupby(["method", "model"], as_index=False)["pred_ms"].mean().rename(columns={"pred_ms": "ms"})
        pr["series"] = pr["method"].map(method_label)
        tab = pd.concat([meas, pr[["model", "ms", "series"]]], ignore_index=True)
        order = ["Target (measured)", *sorted(pr["series"].unique())]
        _grouped_bars(ax, tab, "model", "series", "ms", [m for m in models if m in set(g["model"])], order)
        ax.set_ylabel("training-step latency (ms)")
        ax.set_title(f"{gpu} ({img_px}px)")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Batch latency: measured target vs predictions" + (f" ({note})" if note else ""))
    fig.tight_layout()
    _save(fig, path)


def figure5(shares: pd.DataFrame, path: str | os.PathLike[str], note: str = "") -> None:
    """Share of predictions within 5/10/20/50 % APE, one bar group per method."""
    fig, ax = plt.subplots(figsize=(10, 4.5))
    t = shares.assign(pct=shares["share"] * 100.0, thr=shares["threshold_pct"].map(lambda v: f"<= {v:.0f}%"))
    _grouped_bars(ax, t, "method", "thr", "pct", labels=None)
    ax.set_xticklabels([method_label(m) for m in pd.unique(t["method"])], rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("share of predictions (%)")
    ax.set_ylim(0, 100)
    ax.legend(title="APE", fontsize=8)
    ax.set_title("Share of predictions within an APE threshold" + (f"\n{note}" if note else ""), fontsize=9, wrap=True)
    fig.tight_layout()
    _save(fig, path)


def figure6(bias: pd.DataFrame, path: str | os.PathLike[str], note: str = "") -> None:
    """Bias (mean signed % error) by target generation and input size; one panel per method."""
    methods = list(pd.unique(bias["method"]))
    fig, axes = plt.subplots(1, len(methods), figsize=(4.5 * len(methods), 3.8), squeeze=False)
    for ax, m in zip(axes.flat, methods):
        g = bias[bias["method"] == m].assign(px=lambda d: d["img_px"].map(lambda v: f"{v}x{v}"))
        _grouped_bars(ax, g, "px", "generation", "bias_pct")
        ax.axhline(0, color="black", lw=0.8)
        ax.set_xlabel("input size (px)")
        ax.set_ylabel("bias: mean (pred - target) / target (%)")
        ax.set_title(method_label(m), fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("Prediction bias by target generation and input size (positive = predicted slower)"
                 + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def figure7(grid: pd.DataFrame, path: str | os.PathLike[str], note: str = "") -> None:
    """MAPE by batch size within precision, bars per input size; one panel per method."""
    methods = list(pd.unique(grid["method"]))
    grid = grid.assign(combo=grid["precision"].str.upper() + " b" + grid["batch_size"].astype(str))
    order = [f"{p.upper()} b{b}" for p in ("fp32", "fp16", "bf16") for b in sorted(grid["batch_size"].unique())]
    order = [o for o in order if o in set(grid["combo"])]
    fig, axes = plt.subplots(len(methods), 1, figsize=(9, 3.2 * len(methods)), squeeze=False)
    for ax, m in zip(axes.flat, methods):
        g = grid[grid["method"] == m].copy()
        g["px"] = g["img_px"].map(lambda v: f"{v}x{v}")
        _grouped_bars(ax, g, "combo", "px", "mape", order)
        ax.set_ylabel("MAPE (%)")
        ax.set_title(method_label(m), fontsize=9)
        ax.legend(fontsize=7, title="input")
    fig.suptitle("MAPE by precision and batch size" + (f"\n{note}" if note else ""), fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def per_target_bars(per_target: pd.DataFrame, path: str | os.PathLike[str], note: str = "") -> None:
    """MAPE per target GPU (x) and method (bars)."""
    fig, ax = plt.subplots(figsize=(11, 4))
    gpus = sorted(per_target["gpu"].unique())
    methods = list(pd.unique(per_target["method"]))
    _grouped_bars(ax, per_target, "gpu", "method", "mape", gpus, methods, {m: method_label(m) for m in methods})
    ax.set_ylabel("MAPE (%)")
    ax.set_xlabel("target GPU")
    ax.legend(fontsize=8)
    ax.set_title("MAPE per target GPU" + (f" ({note})" if note else ""), fontsize=10)
    fig.tight_layout()
    _save(fig, path)
