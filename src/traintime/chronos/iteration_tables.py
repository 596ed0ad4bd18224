"""Tables and figures of the iteration-time (step-time) evaluation, from the prediction files of
:func:`traintime.chronos.evaluation.evaluate_family`.

Metric conventions (percentages 0-100, times in ms):

* pooled MAPE / RMSE: over every test row of every family of one (protocol, feature set,
  estimator, seed), then mean +- sd over seeds;
* per-group MAPE: one value per held-out group (``lomo``/``lodo``/``logo``: family x held-out
  model/dataset/GPU, 10 / 12 / 30 groups) or per model (random splits); ``mean_group_mape_pct`` is
  their plain mean (each group counts once), then mean +- sd over seeds;
* seed 42 columns: the released scripts' seed; empty when 42 is not among the seeds.

Published values and earlier re-runs come from the packaged reference table
(``resources/paper_chronos_iteration.csv``, :data:`REFERENCE`), never from this code.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.io import read_csv
from traintime.core.metrics import mape, mean_sd_ci95, median_ape, rmse
from traintime.core.schema import Column, TableSchema

MODEL_NAMES: dict[str, str] = {
    "asmlp": "AS-MLP", "mixer": "MLP-Mixer", "resmlp": "ResMLP", "densenet121": "DenseNet-121",
    "mobilenetv2": "MobileNetV2", "resnet50": "ResNet-50", "vgg16": "VGG-16", "DeiT-Tiny": "DeiT-Tiny",
    "ViT": "ViT", "DistilBERT": "DistilBERT",
}
PAPER_SEED = 42
GROUPED_PROTOCOLS = ("lomo", "lodo", "logo")
RANDOM_PROTOCOLS = ("random", "grouped_random")

REFERENCE = TableSchema(
    name="paper_chronos_iteration",
    description="Published CHRONOS iteration-time values and earlier runs of the released code (references, "
                "not results of this pipeline).",
    columns=(
        Column("kind", "str", "`published` (paper), `released_script` (the released scripts' printout), "
                              "`notes_rerun` (5-seed re-run recorded in the project notes)",
               allowed=("published", "released_script", "notes_rerun")),
        Column("family", "str", "model family or `ALL`"),
        Column("model", "str", "model (release name); empty for pooled values", nullable=True),
        Column("protocol", "str", "evaluation protocol"),
        Column("feature_set", "str", "feature set"),
        Column("estimator", "str", "regressor"),
        Column("metric", "str", "metric", allowed=("rmse_ms", "mape_pct", "mean_group_mape_pct")),
        Column("value", "float", "value"),
        Column("sd", "float", "standard deviation over seeds, if reported", nullable=True),
        Column("source", "str", "where the value comes from"),
    ),
)

PREDICTIONS = TableSchema(
    name="iteration_predictions",
    description="One test prediction of a step-time regressor (one row per protocol, feature set, estimator, "
                "seed, fold and test row).",
    columns=(
        Column("family", "str", "model family"),
        Column("protocol", "str", "evaluation protocol"),
        Column("feature_set", "str", "feature set"),
        Column("estimator", "str", "regressor"),
        Column("seed", "int", "seed of the split and of the regressor"),
        Column("fold", "str", "`test` for random splits, else the held-out model / dataset / GPU"),
        Column("row_id", "str", "row of the iteration table"),
        Column("model", "str", "model"),
        Column("dataset", "str", "dataset"),
        Column("gpu", "str", "canonical GPU"),
        Column("y_true_ms", "float", "measured step time, ms", min=0),
        Column("y_pred_ms", "float", "predicted step time, ms"),
    ),
)


def load_reference(path: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The packaged reference values (or ``path``), validated."""
    p = Path(path) if path else Path(str(resources.files("traintime") / "resources" / "paper_chronos_iteration.csv"))
    return REFERENCE.validate(read_csv(p, keep_default_na=True), source=str(p))


def load_predictions(paths: list[str] | list[Path]) -> pd.DataFrame:
    parts = [PREDICTIONS.validate(read_csv(p), source=str(p)) for p in paths]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=PREDICTIONS.names)


def _ref(ref: pd.DataFrame, kind: str, metric: str, **match: str) -> pd.DataFrame:
    sel = (ref["kind"] == kind) & (ref["metric"] == metric)
    for k, v in match.items():
        sel &= ref[k].fillna("") == v
    return ref[sel]


def _ref_value(ref: pd.DataFrame, kind: str, metric: str, **match: str) -> tuple[float, float]:
    r = _ref(ref, kind, metric, **match)
    if r.empty:
        return float("nan"), float("nan")
    return float(r["value"].iloc[0]), float(r["sd"].iloc[0]) if pd.notna(r["sd"].iloc[0]) else float("nan")


def _metrics(g: pd.DataFrame) -> dict[str, float]:
    t, p = g["y_true_ms"].to_numpy(), g["y_pred_ms"].to_numpy()
    return {"n_test": int(len(g)), "mean_step_time_ms": float(t.mean()), "mape_pct": mape(t, p),
            "median_ape_pct": median_ape(t, p), "rmse_ms": rmse(t, p)}


def group_metrics(pred: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Metrics of each group of ``by`` (n_test, mean step time, MAPE, median APE, RMSE)."""
    rows = []
    for keys, g in pred.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        rows.append({**dict(zip(by, keys)), **_metrics(g)})
    return pd.DataFrame(rows, columns=[*by, "n_test", "mean_step_time_ms", "mape_pct", "median_ape_pct", "rmse_ms"])


def _mean_sd(df: pd.DataFrame, by: list[str], cols: list[str]) -> pd.DataFrame:
    """Mean, sd (ddof=1; NaN for one seed) and 95 % t interval (``_ci95_low``/``_ci95_high``,
    :func:`traintime.core.metrics.mean_sd_ci95`) of ``cols`` over seeds, per ``by``."""
    rows = []
    for keys, g in df.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        row = dict(zip(by, keys))
        for c in cols:
            row[f"{c}_mean"], row[f"{c}_sd"], row[f"{c}_ci95_low"], row[f"{c}_ci95_high"] = mean_sd_ci95(g[c])
        row["n_seeds"] = int(g["seed"].nunique())
        rows.append(row)
    order = [*by, *[f"{c}_{s}" for c in cols for s in ("mean", "sd", "ci95_low", "ci95_high")], "n_seeds"]
    return pd.DataFrame(rows, columns=order)


# --- per-model table (random split) ---------------------------------------------------------------
def per_model_long(pred: pd.DataFrame) -> pd.DataFrame:
    """Per-model RMSE and MAPE of the random splits, mean +- sd over seeds, for every feature set and
    estimator (``iteration_per_model``)."""
    sub = pred[pred["protocol"].isin(RANDOM_PROTOCOLS)]
    cols = ["protocol", "feature_set", "estimator", "family", "model", "n_test", "mape_pct_mean", "mape_pct_sd",
            "rmse_ms_mean", "rmse_ms_sd", "n_seeds"]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    per = group_metrics(sub, ["protocol", "feature_set", "estimator", "family", "model", "seed"])
    agg = _mean_sd(per, ["protocol", "feature_set", "estimator", "family", "model"], ["mape_pct", "rmse_ms"])
    n = per.groupby(["protocol", "feature_set", "estimator", "family", "model"])["n_test"].mean().round().astype(int)
    agg = agg.merge(n.reset_index(), on=["protocol", "feature_set", "estimator", "family", "model"])
    return agg[cols]


def per_model_rmse_table(pred: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Paper comparison (``iteration_per_model_rmse``): random split, paper features, XGBoost, per model.

    Columns: family, model, model_name, n_test_seed42, rmse_ms_seed42, mape_pct_seed42,
    released_seed42_rmse_ms, seed42_vs_released_pct, rmse_ms_mean, rmse_ms_sd, mape_pct_mean,
    mape_pct_sd, n_seeds, paper_rmse_ms, notes_rmse_ms_mean, notes_rmse_ms_sd, clean_rmse_ms_mean,
    clean_rmse_ms_sd, clean_grouped_rmse_ms_mean, clean_grouped_rmse_ms_sd.
    """
    cols = ["family", "model", "model_name", "n_test_seed42", "rmse_ms_seed42", "mape_pct_seed42",
            "released_seed42_rmse_ms", "seed42_vs_released_pct", "rmse_ms_mean", "rmse_ms_sd", "mape_pct_mean",
            "mape_pct_sd", "n_seeds", "paper_rmse_ms", "notes_rmse_ms_mean", "notes_rmse_ms_sd",
            "clean_rmse_ms_mean", "clean_rmse_ms_sd", "clean_grouped_rmse_ms_mean", "clean_grouped_rmse_ms_sd"]
    base = pred[(pred["protocol"] == "random") & (pred["feature_set"] == "paper") & (pred["estimator"] == "xgboost")]
    if base.empty:
        return pd.DataFrame(columns=cols)
    per = group_metrics(base, ["family", "model", "seed"])
    agg = _mean_sd(per, ["family", "model"], ["rmse_ms", "mape_pct"])
    s42 = per[per["seed"] == PAPER_SEED].set_index(["family", "model"])

    def other(protocol: str, fs: str) -> pd.DataFrame:
        sub = pred[(pred["protocol"] == protocol) & (pred["feature_set"] == fs) & (pred["estimator"] == "xgboost")]
        if sub.empty:
            return pd.DataFrame(columns=["rmse_ms_mean", "rmse_ms_sd"])
        return _mean_sd(group_metrics(sub, ["family", "model", "seed"]), ["family", "model"],
                        ["rmse_ms"]).set_index(["family", "model"])

    clean, clean_g = other("random", "clean"), other("grouped_random", "clean")
    rows = []
    for r in agg.itertuples(index=False):
        key = (r.family, r.model)
        rel, _ = _ref_value(ref, "released_script", "rmse_ms", model=r.model)
        pub, _ = _ref_value(ref, "published", "rmse_ms", model=r.model)
        nm, nsd = _ref_value(ref, "notes_rerun", "rmse_ms", model=r.model)
        has42 = key in s42.index
        r42 = float(s42.loc[key, "rmse_ms"]) if has42 else float("nan")
        rows.append({
            "family": r.family, "model": r.model, "model_name": MODEL_NAMES.get(r.model, r.model),
            "n_test_seed42": int(s42.loc[key, "n_test"]) if has42 else pd.NA,
            "rmse_ms_seed42": r42, "mape_pct_seed42": float(s42.loc[key, "mape_pct"]) if has42 else float("nan"),
            "released_seed42_rmse_ms": rel, "seed42_vs_released_pct": (r42 / rel - 1) * 100 if rel == rel else float("nan"),
            "rmse_ms_mean": r.rmse_ms_mean, "rmse_ms_sd": r.rmse_ms_sd, "mape_pct_mean": r.mape_pct_mean,
            "mape_pct_sd": r.mape_pct_sd, "n_seeds": r.n_seeds, "paper_rmse_ms": pub,
            "notes_rmse_ms_mean": nm, "notes_rmse_ms_sd": nsd,
            "clean_rmse_ms_mean": float(clean.loc[key, "rmse_ms_mean"]) if key in clean.index else float("nan"),
            "clean_rmse_ms_sd": float(clean.loc[key, "rmse_ms_sd"]) if key in clean.index else float("nan"),
            "clean_grouped_rmse_ms_mean": float(clean_g.loc[key, "rmse_ms_mean"]) if key in clean_g.index else float("nan"),
            "clean_grouped_rmse_ms_sd": float(clean_g.loc[key, "rmse_ms_sd"]) if key in clean_g.index else float("nan"),
        })
    out = pd.DataFrame(rows, columns=cols)
    out["n_test_seed42"] = out["n_test_seed42"].astype("Int64")
    return out.sort_values(["family", "model"]).reset_index(drop=True)


# --- regressor comparison ---------------------------------------------------------------------------
def _group_column(protocol: str) -> list[str]:
    return ["family", "fold"] if protocol in GROUPED_PROTOCOLS else ["family", "model"]


def per_seed_summary(pred: pd.DataFrame) -> pd.DataFrame:
    """One row per (protocol, feature set, estimator, seed): pooled MAPE/RMSE and mean per-group MAPE."""
    rows = []
    for (prot, fs, est, seed), g in pred.groupby(["protocol", "feature_set", "estimator", "seed"], sort=True):
        per = group_metrics(g, _group_column(str(prot)))
        rows.append({"protocol": prot, "feature_set": fs, "estimator": est, "seed": seed,
                     "pooled_mape_pct": mape(g["y_true_ms"], g["y_pred_ms"]),
                     "pooled_rmse_ms": rmse(g["y_true_ms"], g["y_pred_ms"]),
                     "mean_group_mape_pct": float(per["mape_pct"].mean()), "n_groups": int(len(per)),
                     "n_test": int(len(g))})
    return pd.DataFrame(rows)


def regressors_table(pred: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Pooled MAPE per estimator x feature set x protocol (``iteration_regressors``).

    Columns: protocol, feature_set, estimator, n_seeds, n_groups, pooled_mape_pct_mean/_sd,
    mean_group_mape_pct_mean/_sd, pooled_rmse_ms_mean/_sd, paper_mape_pct (published, random/paper only),
    notes_pooled_mape_pct_mean/_sd (earlier re-run, random/paper), notes_mean_group_mape_pct (earlier
    re-run, lomo/lodo/logo with paper and paper_noleak features).
    """
    cols = ["protocol", "feature_set", "estimator", "n_seeds", "n_groups", "pooled_mape_pct_mean",
            "pooled_mape_pct_sd", "pooled_mape_pct_ci95_low", "pooled_mape_pct_ci95_high", "mean_group_mape_pct_mean",
            "mean_group_mape_pct_sd", "mean_group_mape_pct_ci95_low", "mean_group_mape_pct_ci95_high",
            "pooled_rmse_ms_mean",
            "pooled_rmse_ms_sd", "paper_mape_pct", "notes_pooled_mape_pct_mean", "notes_pooled_mape_pct_sd",
            "notes_mean_group_mape_pct"]
    if pred.empty:
        return pd.DataFrame(columns=cols)
    ps = per_seed_summary(pred)
    agg = _mean_sd(ps, ["protocol", "feature_set", "estimator"], ["pooled_mape_pct", "mean_group_mape_pct",
                                                                  "pooled_rmse_ms"])
    ng = ps.groupby(["protocol", "feature_set", "estimator"])["n_groups"].max().reset_index()
    agg = agg.merge(ng, on=["protocol", "feature_set", "estimator"])
    pap, nm, nsd, ng_ = [], [], [], []
    for r in agg.itertuples(index=False):
        match = {"protocol": r.protocol, "feature_set": r.feature_set, "estimator": r.estimator, "family": "ALL"}
        pap.append(_ref_value(ref, "published", "mape_pct", **match)[0])
        m, sd = _ref_value(ref, "notes_rerun", "mape_pct", **match)
        nm.append(m)
        nsd.append(sd)
        ng_.append(_ref_value(ref, "notes_rerun", "mean_group_mape_pct", **match)[0])
    agg["paper_mape_pct"], agg["notes_pooled_mape_pct_mean"], agg["notes_pooled_mape_pct_sd"] = pap, nm, nsd
    agg["notes_mean_group_mape_pct"] = ng_
    order = {p: i for i, p in enumerate(["random", "grouped_random", "lomo", "lodo", "logo"])}
    agg["_o"] = agg["protocol"].map(order).fillna(99)
    return agg.sort_values(["_o", "feature_set", "estimator"]).drop(columns="_o").reset_index(drop=True)[cols]


# --- grouped protocols ----------------------------------------------------------------------------
def grouped_table(pred: pd.DataFrame, protocol: str) -> pd.DataFrame:
    """Every held-out group of ``protocol`` (``iteration_grouped_<protocol>``).

    Columns: feature_set, estimator, family, group, n_test, mean_step_time_ms, mape_pct_mean,
    mape_pct_sd, mape_pct_ci95_low/_high (95 % t interval over seeds), median_ape_pct_mean, rmse_ms_mean,
    rmse_ms_sd, n_seeds. Nested rows (``feature_set`` = ``estimator`` = ``nested``) are outer-fold scores.
    """
    cols = ["feature_set", "estimator", "family", "group", "n_test", "mean_step_time_ms", "mape_pct_mean",
            "mape_pct_sd", "mape_pct_ci95_low", "mape_pct_ci95_high", "median_ape_pct_mean", "rmse_ms_mean",
            "rmse_ms_sd", "n_seeds"]
    sub = pred[pred["protocol"] == protocol]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    per = group_metrics(sub, ["feature_set", "estimator", "family", "fold", "seed"])
    agg = _mean_sd(per, ["feature_set", "estimator", "family", "fold"], ["mape_pct", "rmse_ms", "median_ape_pct"])
    extra = per.groupby(["feature_set", "estimator", "family", "fold"])[["n_test", "mean_step_time_ms"]].mean()
    agg = agg.merge(extra.reset_index(), on=["feature_set", "estimator", "family", "fold"])
    agg["n_test"] = agg["n_test"].round().astype(int)
    agg = agg.rename(columns={"fold": "group"})
    return agg.sort_values(["feature_set", "estimator", "family", "group"]).reset_index(drop=True)[cols]


def grouped_summary(pred: pd.DataFrame, ref: pd.DataFrame) -> pd.DataFrame:
    """Mean per-group MAPE per protocol x feature set x estimator x family (and ALL families)
    (``iteration_grouped_summary``).

    Columns: protocol, feature_set, estimator, family, n_groups, mean_group_mape_pct_mean,
    mean_group_mape_pct_sd (over seeds), median_group_mape_pct, worst_group, worst_group_mape_pct,
    n_seeds, notes_mean_group_mape_pct (the notes' re-run with this feature set), and
    leakfree_reference_mape_pct: the notes' re-run of XGBoost on the released features without
    ``loader_ratio`` (the leak-free number to beat), beside every XGBoost row of all families.
    """
    cols = ["protocol", "feature_set", "estimator", "family", "n_groups", "mean_group_mape_pct_mean",
            "mean_group_mape_pct_sd", "mean_group_mape_pct_ci95_low", "mean_group_mape_pct_ci95_high",
            "median_group_mape_pct", "worst_group", "worst_group_mape_pct", "n_seeds",
            "notes_mean_group_mape_pct", "leakfree_reference_mape_pct"]
    sub = pred[pred["protocol"].isin(GROUPED_PROTOCOLS)]
    if sub.empty:
        return pd.DataFrame(columns=cols)
    per = group_metrics(sub, ["protocol", "feature_set", "estimator", "family", "fold", "seed"])
    rows = []
    for (prot, fs, est), g in per.groupby(["protocol", "feature_set", "estimator"], sort=True):
        for fam in [*sorted(g["family"].unique()), "ALL"]:
            gf = g if fam == "ALL" else g[g["family"] == fam]
            by_seed = gf.groupby("seed")["mape_pct"].mean()
            by_group = gf.groupby(["family", "fold"])["mape_pct"].mean()
            worst = by_group.idxmax()
            m, sd, lo, hi = mean_sd_ci95(by_seed.to_numpy())  # sd, interval: NaN for one seed
            notes = _ref_value(ref, "notes_rerun", "mean_group_mape_pct", protocol=prot, feature_set=fs,
                               estimator=est, family=fam)[0]
            leakfree = (_ref_value(ref, "notes_rerun", "mean_group_mape_pct", protocol=prot,
                                   feature_set="paper_noleak", estimator="xgboost", family="ALL")[0]
                        if est == "xgboost" and fam == "ALL" else float("nan"))
            rows.append({"protocol": prot, "feature_set": fs, "estimator": est, "family": fam,
                         "n_groups": int(len(by_group)), "mean_group_mape_pct_mean": float(m),
                         "mean_group_mape_pct_sd": sd, "mean_group_mape_pct_ci95_low": lo,
                         "mean_group_mape_pct_ci95_high": hi, "median_group_mape_pct": float(by_group.median()),
                         "worst_group": f"{worst[0]}:{worst[1]}", "worst_group_mape_pct": float(by_group.max()),
                         "n_seeds": int(gf["seed"].nunique()), "notes_mean_group_mape_pct": notes,
                         "leakfree_reference_mape_pct": leakfree})
    out = pd.DataFrame(rows, columns=cols)
    order = {p: i for i, p in enumerate(GROUPED_PROTOCOLS)}
    out["_o"] = out["protocol"].map(order)
    return out.sort_values(["_o", "feature_set", "estimator", "family"], kind="mergesort")\
        .drop(columns="_o").reset_index(drop=True)


# --- figures --------------------------------------------------------------------------------------
def figure_pred_vs_measured(pred: pd.DataFrame, path: str | os.PathLike[str],
                            panels: tuple[tuple[str, str], ...] = (("random", "paper"), ("grouped_random", "clean"),
                                                                   ("logo", "clean"))) -> None:
    """Log-log predicted vs measured step time (XGBoost, first seed) for each (protocol, feature set)."""
    from traintime.core.plots import FAMILY_COLORS, loglog_scatter, new_figure, savefig

    avail = [(p, f) for p, f in panels
             if not pred[(pred["protocol"] == p) & (pred["feature_set"] == f) & (pred["estimator"] == "xgboost")].empty]
    if not avail:  # fall back to whatever exists
        avail = [tuple(k) for k in pred[["protocol", "feature_set"]].drop_duplicates().head(3).to_numpy()]
    fig, axes = new_figure(1, max(1, len(avail)), width=4.2, height=4.0)
    for ax, (prot, fs) in zip(axes[0], avail):
        sub = pred[(pred["protocol"] == prot) & (pred["feature_set"] == fs)]
        est = "xgboost" if (sub["estimator"] == "xgboost").any() else str(sub["estimator"].iloc[0])
        sub = sub[sub["estimator"] == est]
        seed = int(PAPER_SEED if (sub["seed"] == PAPER_SEED).any() else sub["seed"].min())
        sub = sub[sub["seed"] == seed]
        colors = [FAMILY_COLORS.get(f, "#7f7f7f") for f in sub["family"]]
        fams = sorted(sub["family"].unique())
        title = (f"{prot}, {fs} features, {est}, seed {seed}\n"
                 f"MAPE {mape(sub['y_true_ms'], sub['y_pred_ms']):.1f}% over {len(sub)} test rows")
        loglog_scatter(ax, sub["y_true_ms"].to_numpy(), sub["y_pred_ms"].to_numpy(), colors,
                       labels={FAMILY_COLORS.get(f, "#7f7f7f"): f for f in fams}, unit="ms, step time", title=title)
    fig.suptitle("CHRONOS step time: predicted vs measured (log-log)", fontsize=10)
    savefig(fig, path)


def figure_grouped_errors(pred: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """MAPE of every held-out group (LOMO, LODO, LOGO), one bar per feature set (XGBoost), error bars =
    sd over seeds; the replicate-median baseline as black ticks when present."""
    from traintime.core.plots import grouped_bars, new_figure, savefig

    prots = [p for p in GROUPED_PROTOCOLS if (pred["protocol"] == p).any()]
    fig, axes = new_figure(len(prots) or 1, 1, width=11.0, height=3.6)
    for ax, prot in zip(axes[:, 0], prots):
        tab = grouped_table(pred, prot)
        tab["label"] = tab["family"] + ":" + tab["group"]
        labels = sorted(tab["label"].unique(), key=lambda s: (s.split(":")[0], s.split(":", 1)[1]))
        series, errors = {}, {}
        xgb = tab[tab["estimator"] == "xgboost"] if (tab["estimator"] == "xgboost").any() else tab
        est_name = str(xgb["estimator"].iloc[0])
        for fs, g in xgb.groupby("feature_set", sort=True):
            s = g.set_index("label").reindex(labels)
            series[f"{fs} ({est_name})"] = s["mape_pct_mean"].to_numpy()
            if s["mape_pct_sd"].notna().any():  # one seed: no spread measured, no error bars
                errors[f"{fs} ({est_name})"] = s["mape_pct_sd"].fillna(0).to_numpy()
        n_seeds = int(xgb["n_seeds"].max())
        bars = "error bars: sd over seeds" if errors else f"{n_seeds} seed{'s' if n_seeds > 1 else ''}, no error bars"
        grouped_bars(ax, labels, series, errors or None, ylabel="MAPE (%) of the held-out group", log=True,
                     title=f"{prot.upper()}: step-time MAPE per held-out group ({bars})")
        rm = tab[tab["estimator"] == "replicate_median"]
        if not rm.empty:
            s = rm.groupby("label")["mape_pct_mean"].mean().reindex(labels)
            ax.scatter(np.arange(len(labels)), s.to_numpy(), marker="_", s=120, color="black",
                       label="replicate_median", zorder=3)
            ax.legend(fontsize=7)
    savefig(fig, path)


def figure_seed_spread(pred: pd.DataFrame, ref: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Per-model RMSE of every seed (random split, paper features, XGBoost) with the published value
    and the released scripts' seed-42 value."""
    from traintime.core.plots import new_figure, savefig

    base = pred[(pred["protocol"] == "random") & (pred["feature_set"] == "paper") & (pred["estimator"] == "xgboost")]
    fig, axes = new_figure(1, 1, width=9.0, height=4.0)
    ax = axes[0, 0]
    if not base.empty:
        per = group_metrics(base, ["family", "model", "seed"])
        models = sorted(per["model"].unique(), key=lambda m: (per.loc[per["model"] == m, "family"].iloc[0], m))
        x = {m: i for i, m in enumerate(models)}
        ax.scatter([x[m] for m in per["model"]], per["rmse_ms"], s=14, color="#1f77b4", alpha=0.7,
                   label=f"this pipeline, {per['seed'].nunique()} seeds")
        means = per.groupby("model")["rmse_ms"].mean()
        ax.scatter([x[m] for m in means.index], means.to_numpy(), marker="_", s=300, color="#1f77b4",
                   label="mean over seeds")
        for kind, marker, color, label in (("published", "x", "#d62728", "paper (published)"),
                                           ("released_script", "D", "#2ca02c", "released scripts, seed 42")):
            r = _ref(ref, kind, "rmse_ms")
            r = r[r["model"].isin(models)]
            ax.scatter([x[m] for m in r["model"]], r["value"], marker=marker, s=30, color=color, label=label,
                       facecolors="none" if marker == "D" else None)
        ax.set_xticks(range(len(models)))
        ax.set_xticklabels([MODEL_NAMES.get(m, m) for m in models], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("RMSE of the 10% test rows (ms)")
    ax.set_title("Random 80/10/10 split, released features and XGBoost: per-model RMSE across seeds", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", lw=0.3, alpha=0.5)
    savefig(fig, path)

