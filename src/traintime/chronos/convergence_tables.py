"""Convergence tables and figures: per-model and summary MAPE beside the published values, markdown, plots."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from traintime.chronos.convergence import ESTIMATORS, PROTOCOLS
from traintime.core.io import to_markdown
from traintime.core.metrics import mean_sd
from traintime.core.schema import Column, TableSchema
from traintime.data.chronos_convergence import MODEL_LABELS, PAPER_MODELS

# --------------------------------------------------------------------------------------------
# Tables


def per_model_seed_mape(preds: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) per protocol, method, seed and model: columns protocol, method, seed, model, n_runs, mape_pct."""
    g = preds.groupby(["protocol", "method", "seed", "model"], sort=True)["ape_pct"]
    return g.agg(n_runs="size", mape_pct="mean").reset_index()


def summary_seed_metrics(preds: pd.DataFrame, paper_models: Sequence[str] = PAPER_MODELS) -> pd.DataFrame:
    """Per protocol, method and seed: ``avg_model_mape_pct`` (mean of the per-model MAPEs of the
    paper's nine models, the paper's "Average"), ``pooled_mape_pct`` and ``median_ape_pct`` over
    all runs (DistilBERT included)."""
    pm = per_model_seed_mape(preds)
    pm = pm[pm["model"].isin(paper_models)]
    avg = pm.groupby(["protocol", "method", "seed"])["mape_pct"].mean().rename("avg_model_mape_pct")
    pooled = preds.groupby(["protocol", "method", "seed"])["ape_pct"].agg(
        pooled_mape_pct="mean", median_ape_pct="median", n_runs="size")
    return pd.concat([avg, pooled], axis=1).reset_index()


def _ordered(df: pd.DataFrame, methods: Sequence[str] | None, protocols: Sequence[str] | None,
             extra: Sequence[str] = ()) -> pd.DataFrame:
    p_order = {p: i for i, p in enumerate(protocols or PROTOCOLS)}
    m_order = {m: i for i, m in enumerate(methods or ESTIMATORS)}
    df = df.assign(_p=df["protocol"].map(p_order), _m=df["method"].map(m_order))
    return df.sort_values(["_p", "_m", *extra], kind="mergesort").drop(columns=["_p", "_m"]).reset_index(drop=True)


def per_model_table(preds: pd.DataFrame, reference: pd.DataFrame | None = None,
                    methods: Sequence[str] | None = None, protocols: Sequence[str] | None = None) -> pd.DataFrame:
    """Per protocol, method and model: MAPE mean and sd over seeds, plus the published value.

    ``reference``: rows (method, model, mape_pct, kind) as in ``paper_chronos_convergence.csv``;
    ``published`` rows fill ``paper_mape_pct``. Columns: protocol, method, model, model_label,
    in_paper_table, n_runs, n_seeds, mape_mean_pct, mape_sd_pct, paper_mape_pct.
    """
    pm = per_model_seed_mape(preds)
    rows = []
    for (protocol, method, model), g in pm.groupby(["protocol", "method", "model"], sort=True):
        m, sd = mean_sd(g["mape_pct"])
        rows.append(dict(protocol=protocol, method=method, model=model, model_label=MODEL_LABELS.get(model, model),
                         in_paper_table=model in PAPER_MODELS, n_runs=int(g["n_runs"].iloc[0]),
                         n_seeds=int(g["seed"].nunique()), mape_mean_pct=m, mape_sd_pct=sd))
    out = pd.DataFrame(rows)
    out["paper_mape_pct"] = _lookup(reference, out["method"], out["model"])
    model_rank = {m: i for i, m in enumerate((*PAPER_MODELS, *sorted(set(out["model"]) - set(PAPER_MODELS))))}
    out["_r"] = out["model"].map(model_rank)
    out = _ordered(out, methods, protocols, ["_r"]).drop(columns=["_r"])
    return out


def _t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """Student-t ``level`` interval of the mean over seeds (NaN with fewer than two seeds)."""
    from scipy.stats import t as student_t

    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 2:
        return float("nan"), float("nan")
    h = float(student_t.ppf((1 + level) / 2, v.size - 1)) * float(v.std(ddof=1)) / math.sqrt(v.size)
    return float(v.mean() - h), float(v.mean() + h)


def summary_table(preds: pd.DataFrame, reference: pd.DataFrame | None = None,
                  methods: Sequence[str] | None = None, protocols: Sequence[str] | None = None) -> pd.DataFrame:
    """Per protocol and method: mean, sd and 95 % t-interval (``avg_model_mape_ci95_lo_pct`` / ``_hi_pct``)
    over seeds of the nine-model average MAPE (the paper's "Average"), pooled MAPE and median APE over all runs, plus the published average and the
    shared notes' re-run value where ``reference`` has them (model ``average``)."""
    s = summary_seed_metrics(preds)
    rows = []
    for (protocol, method), g in s.groupby(["protocol", "method"], sort=True):
        row = dict(protocol=protocol, method=method, n_seeds=int(g["seed"].nunique()), n_runs=int(g["n_runs"].iloc[0]))
        for col in ("avg_model_mape_pct", "pooled_mape_pct", "median_ape_pct"):
            row[f"{col[:-4]}_mean_pct"], row[f"{col[:-4]}_sd_pct"] = mean_sd(g[col])
        row["avg_model_mape_ci95_lo_pct"], row["avg_model_mape_ci95_hi_pct"] = _t_interval(g["avg_model_mape_pct"])
        rows.append(row)
    out = pd.DataFrame(rows)
    avg = pd.Series("average", index=out.index)
    out["paper_avg_model_mape_pct"] = _lookup(reference, out["method"], avg)
    out["notes_rerun_avg_model_mape_pct"] = _lookup(reference, out["method"], avg, kind="notes_rerun",
                                                     protocol=out["protocol"])
    return _ordered(out, methods, protocols)


def _lookup(reference: pd.DataFrame | None, methods: pd.Series, models: pd.Series, kind: str = "published",
            protocol: pd.Series | None = None) -> pd.Series:
    if reference is None or reference.empty:
        return pd.Series(np.nan, index=methods.index)
    ref = reference[reference["kind"] == kind]
    if protocol is None:
        ref = ref.drop_duplicates(["method", "model"])
        table = {(m, d): v for m, d, v in zip(ref["method"], ref["model"], ref["mape_pct"])}
        return pd.Series([table.get((m, d), np.nan) for m, d in zip(methods, models)], index=methods.index,
                         dtype=float)
    table = {(m, d, p): v for m, d, p, v in zip(ref["method"], ref["model"], ref["protocol"], ref["mape_pct"])}
    return pd.Series([table.get((m, d, p), np.nan) for m, d, p in zip(methods, models, protocol)],
                     index=methods.index, dtype=float)


def fmt_cell(mean: float, sd: float, n_seeds: int, digits: int = 2) -> str:
    """'12.34 +- 0.56', or '12.34' when a single seed (or one deterministic fit) was run."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return ""
    if n_seeds <= 1:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} +- {sd:.{digits}f}"


# --------------------------------------------------------------------------------------------
# Reference values (published, and the shared notes' re-run)

REFERENCE = TableSchema(
    name="convergence_reference",
    description="Reference convergence MAPEs: values published in the CHRONOS paper (`kind = published`) "
                "and the shared notes' re-run of the released code (`kind = notes_rerun`). Not results.",
    key=("kind", "method", "model", "protocol"),
    columns=(
        Column("kind", "str", "`published` (paper) or `notes_rerun` (shared notes)",
               allowed=("published", "notes_rerun")),
        Column("method", "str", "estimator name of this project the value corresponds to"),
        Column("model", "str", "released model identifier, or `average` for the paper's nine-model average"),
        Column("protocol", "str", "protocol of a re-run value; empty for published values (the paper does not "
               "say)", nullable=True),
        Column("mape_pct", "float", "MAPE of the convergence epoch, percent", min=0),
        Column("source", "str", "where the value comes from"),
    ),
)


def load_reference(paths: Sequence[str] | None = None) -> pd.DataFrame:
    """Published and re-run reference values (default: the two packaged CSVs), validated."""
    from importlib import resources

    from traintime.core.io import read_csv

    if paths is None:
        base = resources.files("traintime") / "resources"
        paths = [str(base / "paper_chronos_convergence.csv"), str(base / "notes_chronos_convergence.csv")]
    frames = [REFERENCE.validate(read_csv(p, keep_default_na=False, na_values={"mape_pct": [""]}), source=str(p))
              for p in paths]
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Markdown and figures

METHOD_LABELS: dict[str, str] = {
    "chronos_rf": "CHRONOS RF", "chronos_xgb": "XGBoost", "no_probe_rf": "RF, no probe",
    "scaling_law": "Scaling law", "ntk_guided": "NTK-guided", "constant_mean": "Const. mean",
    "constant_median": "Const. median", "group_median": "Group median", "partial_pooling": "Partial pooling",
    "pooled_loglinear": "Pooled + lr/batch slopes", "xgb_monotone": "XGB monotone (physical)",
    "pooled_or_xgb": "Pooled if seen, else XGB", "xgb_probe": "XGB monotone + probe",
    "ntk_guided_per_model": "NTK-guided, per-model intercept", "nested": "Nested choice (inner CV)",
}
PROTOCOL_LABELS: dict[str, str] = {"cv": "5-fold CV", "lomo": "leave one model out", "lodo": "leave one dataset out"}
_PAPER_COLUMNS = (("scaling_law", "paper: Scaling law"), ("ntk_guided", "paper: NTK-guided"),
                  ("chronos_rf", "paper: CHRONOS"))


def per_model_markdown(per_model: pd.DataFrame, summary: pd.DataFrame, reference: pd.DataFrame | None = None) -> str:
    """One wide markdown table per protocol: models x methods ('mean +- sd' over seeds) beside the
    paper's three columns (from ``reference``), with an 'Average (9 paper models)' row."""
    published = {} if reference is None else {
        (r.method, r.model): r.mape_pct for r in reference[reference["kind"] == "published"].itertuples()}
    parts = []
    protocols = list(dict.fromkeys(per_model["protocol"]))
    methods = list(dict.fromkeys(per_model["method"]))
    for protocol in protocols:
        pm = per_model[per_model["protocol"] == protocol]
        sm = summary[summary["protocol"] == protocol]
        models = list(dict.fromkeys(pm["model"]))
        rows = []
        for model in [*models, "average"]:
            row = {"model": "Average (9 paper models)" if model == "average" else MODEL_LABELS.get(model, model)}
            for m in methods:
                if model == "average":
                    g = sm[sm["method"] == m]
                    cell = fmt_cell(*g[["avg_model_mape_mean_pct", "avg_model_mape_sd_pct"]].iloc[0],
                                    int(g["n_seeds"].iloc[0])) if len(g) else ""
                else:
                    g = pm[(pm["method"] == m) & (pm["model"] == model)]
                    cell = fmt_cell(*g[["mape_mean_pct", "mape_sd_pct"]].iloc[0], int(g["n_seeds"].iloc[0])) \
                        if len(g) else ""
                row[METHOD_LABELS.get(m, m)] = cell
            for m, label in _PAPER_COLUMNS:
                v = published.get((m, model))
                row[label] = "" if v is None else f"{v:.2f}"
            rows.append(row)
        n_seeds = int(pm["n_seeds"].max())
        parts.append(f"## {PROTOCOL_LABELS.get(protocol, protocol)} (`{protocol}`), MAPE % "
                     f"(mean +- sd over {n_seeds} seed(s))\n\n" + to_markdown(pd.DataFrame(rows)))
    return "\n".join(parts)


def summary_markdown(summary: pd.DataFrame) -> str:
    rows = []
    for r in summary.itertuples(index=False):
        rows.append({
            "protocol": r.protocol, "method": r.method, "seeds": r.n_seeds,
            "avg of 9 models MAPE %": fmt_cell(r.avg_model_mape_mean_pct, r.avg_model_mape_sd_pct, r.n_seeds),
            "95 % interval": ("" if pd.isna(r.avg_model_mape_ci95_lo_pct)
                              else f"{r.avg_model_mape_ci95_lo_pct:.2f} - {r.avg_model_mape_ci95_hi_pct:.2f}"),
            "pooled MAPE % (324 runs)": fmt_cell(r.pooled_mape_mean_pct, r.pooled_mape_sd_pct, r.n_seeds),
            "median APE %": fmt_cell(r.median_ape_mean_pct, r.median_ape_sd_pct, r.n_seeds),
            "paper avg %": "" if pd.isna(r.paper_avg_model_mape_pct) else f"{r.paper_avg_model_mape_pct:.2f}",
            "notes re-run avg %": ("" if pd.isna(r.notes_rerun_avg_model_mape_pct)
                                   else f"{r.notes_rerun_avg_model_mape_pct:.2f}"),
        })
    return to_markdown(pd.DataFrame(rows))


def plot_predicted_vs_measured(preds: pd.DataFrame, method: str, protocols: Sequence[str], seed: int,
                               path: str) -> None:
    """Scatter of predicted vs measured T_conv (log axes), one panel per protocol, colour = family."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traintime.core.io import atomic_path

    protocols = [p for p in protocols if ((preds["protocol"] == p) & (preds["method"] == method)).any()]
    fig, axes = plt.subplots(1, max(1, len(protocols)), figsize=(4.2 * max(1, len(protocols)), 4.2), squeeze=False)
    colours = {"CNN": "tab:blue", "MLP": "tab:orange", "Transformer": "tab:green"}
    lo, hi = preds["epochs_measured"].min() * 0.8, max(preds["epochs_measured"].max(), 1) * 1.25
    for ax, protocol in zip(axes[0], protocols):
        d = preds[(preds["protocol"] == protocol) & (preds["method"] == method)]
        d = d[d["seed"] == (seed if (d["seed"] == seed).any() else d["seed"].min())]
        for fam, g in d.groupby("family", sort=True):
            ax.scatter(g["epochs_measured"], g["epochs_predicted"], s=12, alpha=0.7, label=fam,
                       color=colours.get(fam))
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, label="y = x")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("measured epochs to converge T_conv (epochs)")
        ax.set_ylabel("predicted T_conv (epochs)")
        pooled = float(d["ape_pct"].mean())
        ax.set_title(f"{METHOD_LABELS.get(method, method)}, {PROTOCOL_LABELS.get(protocol, protocol)}\n"
                     f"seed {int(d['seed'].iloc[0])}, pooled MAPE {pooled:.1f}%", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle("CHRONOS convergence: predicted vs measured epochs (out-of-fold, 324 released runs)", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, format="png", metadata={"Software": None})
    plt.close(fig)


#: bars above this MAPE are clipped and labelled with their value
YMAX_PCT = 150.0


def plot_per_model_mape(per_model: pd.DataFrame, methods: Sequence[str], path: str) -> None:
    """Grouped bars of per-model MAPE (mean over seeds, error bar = sd where several seeds ran),
    one panel per protocol; the paper's values as black ticks on the CHRONOS, NTK-guided and
    scaling-law bars; bars above :data:`YMAX_PCT` are clipped and labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from traintime.core.io import atomic_path

    protocols = list(dict.fromkeys(per_model["protocol"]))
    methods = [m for m in methods if m in set(per_model["method"])]
    models = [m for m in PAPER_MODELS if m in set(per_model["model"])]
    fig, axes = plt.subplots(len(protocols), 1, figsize=(11, 3.3 * len(protocols)), squeeze=False)
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(models))
    for ax, protocol in zip(axes[:, 0], protocols):
        d = per_model[per_model["protocol"] == protocol].set_index(["method", "model"])
        top = 0.0
        for k, m in enumerate(methods):
            mean = np.array([d.loc[(m, mo), "mape_mean_pct"] if (m, mo) in d.index else np.nan for mo in models])
            sd = np.array([d.loc[(m, mo), "mape_sd_pct"] if (m, mo) in d.index and d.loc[(m, mo), "n_seeds"] > 1
                           else 0.0 for mo in models])
            pos = x - 0.4 + width * (k + 0.5)
            clipped = np.minimum(mean, YMAX_PCT)
            ax.bar(pos, clipped, width, yerr=np.where(mean > YMAX_PCT, 0.0, sd), capsize=2,
                   label=METHOD_LABELS.get(m, m))
            for xi, v in zip(pos, mean):
                if v > YMAX_PCT:
                    ax.annotate(f"{v:.0f}", (xi, YMAX_PCT), ha="center", va="bottom", fontsize=6, rotation=90)
            top = max(top, float(np.nanmax(clipped + sd)) if np.isfinite(clipped).any() else 0.0)
            paper = [d.loc[(m, mo), "paper_mape_pct"] if (m, mo) in d.index else np.nan for mo in models]
            if np.isfinite(np.asarray(paper, dtype=float)).any():
                ax.scatter(pos, paper, marker="_", s=120, color="black", zorder=3,
                           label="paper value")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), fontsize=7, ncol=5)
        ax.set_xticks(x, [MODEL_LABELS.get(m, m) for m in models], fontsize=8)
        ax.set_ylabel("MAPE of T_conv (%)")
        ax.set_ylim(0, min(YMAX_PCT, top) * 1.12 if top > 0 else 1)
        ax.set_title(f"Per-model convergence MAPE, {PROTOCOL_LABELS.get(protocol, protocol)} "
                     f"(bars: mean over seeds, whiskers: sd; black ticks: paper)", fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=150, format="png", metadata={"Software": None})
    plt.close(fig)
