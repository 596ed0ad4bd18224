"""Rendering of ``traintime predict``: text table, JSON records (``schemas/predict_output.schema.json``), plot.

The text table lists every GPU with step time, optional loader wait, epochs, hours and cost, each with its
interval; priced GPUs first, sorted by ``time`` or ``cost``, ``*`` marking the cost-time Pareto front;
unpriced GPUs follow in their own section (they are not part of the cost ranking); GPUs the run is called too big
for (``fits`` False: :mod:`traintime.predict_memory`) come last, in a section of their own, outside the ranking and
the Pareto front.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

#: keys of every JSON record (schemas/predict_output.schema.json); null where unknown
JSON_KEYS: tuple[str, ...] = (
    "gpu", "step_ms", "step_ms_low", "step_ms_high", "loader_ms", "epoch_s", "epochs", "epochs_low", "epochs_high",
    "hours", "hours_low", "hours_high", "cost_usd", "cost_usd_low", "cost_usd_high", "price_per_hour_usd",
    "price_date", "price_source", "pareto", "source", "trained_local_rows", "trained_local_gpus", "memory_gb", "fits",
    "max_batch",
)


def _clean(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
        return None if isinstance(v, float) and not math.isfinite(v) else v
    if isinstance(v, str):
        return v
    try:
        return None if pd.isna(v) else v
    except (TypeError, ValueError):
        return v


def sort_plan(df: pd.DataFrame, sort: str = "time") -> pd.DataFrame:
    """Priced GPUs sorted by ``time`` (hours, else step) or ``cost``; unpriced after them, by time; GPUs the run is
    called too big for (``fits`` False) last."""
    if sort not in ("time", "cost"):
        from traintime.core.errors import TraintimeError

        raise TraintimeError(f"--sort {sort!r}: use time or cost")
    t = df["hours"].where(df["hours"].notna(), df["step_ms"])
    key = (df["cost_usd"].where(df["hours"].notna(), df["step_ms"] * df["price_per_hour_usd"])
           if sort == "cost" else t)
    short = _too_big(df)
    return (df.assign(_s=short, _p=~df["priced"], _k=key, _t=t).sort_values(["_s", "_p", "_k", "_t", "gpu"])
            .drop(columns=["_s", "_p", "_k", "_t"]).reset_index(drop=True))


def _too_big(df: pd.DataFrame) -> pd.Series:
    """True per GPU the run is called too big for (``fits`` False; unknown and older frames: False)."""
    from traintime.measure.memory import called_too_big

    return pd.Series(called_too_big(df["fits"]) if "fits" in df else False, index=df.index)


def records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """JSON records (one per GPU, keys :data:`JSON_KEYS`)."""
    return [{k: _clean(r.get(k)) for k in JSON_KEYS} for r in df.to_dict(orient="records")]


def to_json(df: pd.DataFrame) -> str:
    return json.dumps(records(df), indent=2)


def _iv(v: float, lo: float, hi: float, fmt: str) -> str:
    if v != v:
        return "-"
    s = format(v, fmt)
    if lo == lo and hi == hi:
        s += f" [{format(lo, fmt)}-{format(hi, fmt)}]"
    return s


def text_table(df: pd.DataFrame, coverage: float, loader: bool) -> str:
    """The per-GPU table (see module doc)."""
    pct = f"{round(coverage * 100)}%"
    head = f"{'':1s} {'gpu':26s} {'step ms (' + pct + ')':>24s}"
    if loader:
        head += f" {'loader ms':>9s}"
    head += f" {'epoch s':>10s} {'epochs':>18s} {'hours':>22s} {'cost $':>24s} {'$/h':>6s}"
    lines = []

    def row(r: pd.Series) -> str:
        s = f"{'*' if r['pareto'] else ' '} {str(r['gpu'])[:26]:26s} "
        s += f"{_iv(r['step_ms'], r['step_ms_low'], r['step_ms_high'], '.1f'):>24s}"
        if loader:
            s += f" {r['loader_ms']:9.1f}"
        s += f" {'-' if r['epoch_s'] != r['epoch_s'] else format(r['epoch_s'], '.1f'):>10s}"
        s += f" {_iv(r['epochs'], r['epochs_low'], r['epochs_high'], '.1f'):>18s}"
        s += f" {_iv(r['hours'], r['hours_low'], r['hours_high'], '.2f'):>22s}"
        s += f" {_iv(r['cost_usd'], r['cost_usd_low'], r['cost_usd_high'], '.2f'):>24s}"
        p = r["price_per_hour_usd"]
        s += f" {'' if p != p else format(p, '.2f'):>6s}"
        return s

    short = _too_big(df)
    priced, unpriced, big = df[df["priced"] & ~short], df[~df["priced"] & ~short], df[short]
    lines.append(f"Priced GPUs ({len(priced)}; * = cost-time Pareto front):")
    lines.append(head)
    lines += [row(r) for _, r in priced.iterrows()]
    if len(unpriced):
        lines.append("")
        lines.append(f"Unpriced GPUs ({len(unpriced)}; no public price recorded, not in the cost ranking):")
        lines.append(head)
        lines += [row(r) for _, r in unpriced.iterrows()]
    if len(big):
        need = float(big["memory_gb"].iloc[0])
        lines.append("")
        lines.append(f"Too little memory ({len(big)}; the run needs about {need:.1f} GB, above the usable share of "
                     "these cards' memory; not in the ranking):")
        lines.append(f"  {'gpu':26s} {'memory GB':>9s} {'largest batch':>13s} {'step ms (' + pct + ')':>24s}")
        lines += [f"  {str(r['gpu'])[:26]:26s} {_card_gb(r):>9s} {_whole(r.get('max_batch')):>13s} "
                  f"{_iv(r['step_ms'], r['step_ms_low'], r['step_ms_high'], '.1f'):>24s}" for _, r in big.iterrows()]
    return "\n".join(lines)


def _whole(v: Any) -> str:
    v = float("nan") if v is None else float(v)
    return format(int(v), "d") if math.isfinite(v) else "-"


def _card_gb(r: pd.Series) -> str:
    v = float(r.get("card_memory_gb", float("nan")))
    return format(v, "g") if math.isfinite(v) else "-"


def plot(df: pd.DataFrame, path: str, title: str = "") -> None:
    """Cost against time of the priced GPUs, with interval bars; Pareto front highlighted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = df[df["priced"] & df["hours"].notna()]
    fig, ax = plt.subplots(figsize=(7, 5))
    if d.empty:
        ax.text(0.5, 0.5, "no priced GPU with an hours estimate (epochs unknown?)", ha="center", va="center")
    else:
        xerr = [(d["hours"] - d["hours_low"]).fillna(0), (d["hours_high"] - d["hours"]).fillna(0)]
        yerr = [(d["cost_usd"] - d["cost_usd_low"]).fillna(0), (d["cost_usd_high"] - d["cost_usd"]).fillna(0)]
        ax.errorbar(d["hours"], d["cost_usd"], xerr=xerr, yerr=yerr, fmt="o", color="0.5", ecolor="0.8",
                    label="GPU (interval bars)")
        f = d[d["pareto"]].sort_values("hours")
        ax.plot(f["hours"], f["cost_usd"], "o-", color="C3", label="cost-time Pareto front")
        for _, r in d.iterrows():
            ax.annotate(str(r["gpu"]), (r["hours"], r["cost_usd"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("training time (h)")
    ax.set_ylabel("cost (USD)")
    import textwrap

    ax.set_title(textwrap.fill(title, 90), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
