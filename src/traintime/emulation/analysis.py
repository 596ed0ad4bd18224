"""Metrics and tables of the zero-shot paper, computed from a long *predictions* table.

Every method (emulation, oracle, FLOPS, learned, Habitat, NeuSight) is reduced to rows of
:data:`PREDICTIONS`: one target latency ``latency_ms`` and one prediction ``pred_ms`` per (method,
host, target GPU, workload[, seed]). Each table of the paper is then one function of that table:

- :func:`paper_metrics` (Table 1): MAPE, median APE, SD of APE (ddof=1), Spearman rho, Pearson r of
  log latencies, shares within 5/10/20/50 % APE; per seed, then mean +- sd over seeds.
- :func:`best_worst` (Table 2) and :func:`mape_by` (per target, per family = Table 5, ...).
- :func:`ranking_spearman` (Table 3): per workload, Spearman of the device ranking; mean, sd,
  median, P10, P90 over workloads.
- :func:`host_agreement` (Table 4): two hosts' predictions of the same (target, workload).
- :func:`bias_by` (Figure 6): mean signed percentage error (positive = prediction slower).
- :func:`threshold_shares` (Figure 5), :func:`grid_mape` (Figure 7).

All percentages are in percent; latencies in ms.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from traintime import metrics as M
from traintime.errors import SchemaError
from traintime.emulation.schema import FAMILIES, HOST_LATENCY, PRECISIONS, WORKLOAD_KEY
from traintime.io import read_csv
from traintime.schema import Column, TableSchema

log = logging.getLogger(__name__)

#: Method names and their display labels (paper naming).
METHOD_LABELS: dict[str, str] = {
    "emulation": "Ours (host emulation)",
    "emulation_oracle": "Oracle (best measured host setting)",
    "habitat": "Habitat-style (light)",
    "neusight": "NeuSight-style (light)",
    "flops": "FLOPS scaling",
    "learned": "Learned cross-GPU (xgboost, LOGO)",
}
THRESHOLDS_PCT: tuple[float, ...] = (5.0, 10.0, 20.0, 50.0)
NO_HOST = "no host measurements present: run rules emulation_host_* on a GPU"
NO_OPS = ("no per-op host profiles present (config emulation.op_profile_glob): they come from a "
          "torch.profiler run on the host GPU")

PREDICTIONS = TableSchema(
    name="emulation_predictions",
    description="One prediction of one method for one (host, target GPU, workload[, seed]).",
    key=("method", "host_gpu", "gpu", "model", "img_px", "batch_size", "precision", "seed"),
    columns=(
        Column("method", "str", "prediction method (see analysis.METHOD_LABELS)"),
        Column("host_gpu", "str", "host or reference GPU whose measurement the method uses"),
        Column("gpu", "str", "canonical target GPU"),
        Column("model", "str", "timm model name"),
        Column("family", "str", "model family", allowed=FAMILIES),
        Column("img_px", "int", "input size, pixels", min=1),
        Column("batch_size", "int", "samples per step", min=1),
        Column("precision", "str", "autocast precision", allowed=PRECISIONS),
        Column("latency_ms", "float", "measured target latency, ms", min=0, target=True),
        Column("pred_ms", "float", "predicted latency, ms", min=0),
        Column("seed", "int", "seed of a stochastic method (-1 for deterministic ones)"),
    ),
)
PRED_COLS = PREDICTIONS.names


def to_predictions(df: pd.DataFrame, method: str, seed: int | None = None) -> pd.DataFrame:
    """Select/rename the :data:`PREDICTIONS` columns of a method's output (sorted, validated).

    An empty input gives an empty frame with the right columns (no validation)."""
    out = df.copy()
    out["method"] = method
    if "seed" not in out or seed is not None:
        out["seed"] = -1 if seed is None else seed
    out = out[PRED_COLS]
    if out.empty:
        return out
    out = out.sort_values(["method", "host_gpu", "gpu", *WORKLOAD_KEY, "seed"]).reset_index(drop=True)
    return PREDICTIONS.validate(out, source=f"{method} predictions")


def empty_predictions() -> pd.DataFrame:
    """A predictions frame with the right columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in PRED_COLS})


def read_predictions(paths: Iterable[str | os.PathLike[str]]) -> pd.DataFrame:
    """Concatenate prediction files (files with a header only are allowed and add nothing)."""
    frames = []
    for p in paths:
        df = read_csv(p)
        if not df.empty:
            frames.append(PREDICTIONS.validate(df, source=str(p)))
    if not frames:
        return pd.DataFrame(columns=PRED_COLS)
    return pd.concat(frames, ignore_index=True)


# --------------------------------------------------------------------------------------------
# Host measurements
# --------------------------------------------------------------------------------------------

def measurement_files(dirs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """``*.csv`` files in each folder of ``dirs`` and its subfolders (folder order, then path order).

    Missing folders are skipped. Only files that look like host latency tables (header has
    ``host_gpu`` and ``latency_ms``) are returned; others (manifests, op profiles) are ignored.
    """
    out = []
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(str(d), "**", "*.csv"), recursive=True)):
            try:
                with open(f) as fh:
                    header = fh.readline()
            except OSError:
                continue
            cols = [c.strip() for c in header.strip().split(",")]
            if "host_gpu" in cols and "latency_ms" in cols:
                out.append(f)
    return out


def files_fingerprint(files: Sequence[str]) -> str:
    """sha256 over the names and contents of ``files`` (changes when a measurement file changes)."""
    h = hashlib.sha256()
    for f in files:
        h.update(str(f).encode())
        with open(f, "rb") as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def load_host_rows(files: Sequence[str], allow_synthetic: bool = False) -> pd.DataFrame:
    """Validated host rows of ``files`` (schema ``host_latency``), with a ``source_file`` column.

    Rows repeating a key already read from an earlier file are dropped (earlier folders win) with
    a warning. Synthetic rows are refused unless ``allow_synthetic``. No file: empty frame.
    """
    from traintime.specs import canonical_gpu

    frames = []
    for f in files:
        df = read_csv(f)
        if df.empty:
            continue
        df = HOST_LATENCY.validate(df, source=str(f))
        if df["synthetic"].any() and not allow_synthetic:
            raise SchemaError(f"{f}: contains synthetic rows (synthetic=True); measurements only")
        df["host_gpu"] = [canonical_gpu(g) for g in df["host_gpu"]]
        df["source_file"] = str(f)
        frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*HOST_LATENCY.names, "source_file"])
    out = pd.concat(frames, ignore_index=True)
    dup = out.duplicated(list(HOST_LATENCY.key), keep="first")
    if dup.any():
        log.warning("dropped %d host rows repeating a key of an earlier file", int(dup.sum()))
        out = out[~dup]
    return out.sort_values(list(HOST_LATENCY.key)).reset_index(drop=True)


def read_host_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The merged host table written by rule emulation_measurements (header only = no rows)."""
    df = read_csv(path)
    if df.empty:
        return pd.DataFrame(columns=[*HOST_LATENCY.names, "source_file"])
    return HOST_LATENCY.validate(df, source=str(path))


# --------------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------------

def metric_row(y_true: Sequence[float], y_pred: Sequence[float]) -> dict[str, float]:
    """The paper's pooled metrics of one set of predictions."""
    t = np.asarray(y_true, dtype=float)
    p = np.asarray(y_pred, dtype=float)
    a = M.ape(t, p)
    row = {"n": int(t.size), "mape": float(a.mean()), "median_ape": float(np.median(a)),
           "sd_ape": float(a.std(ddof=1)) if a.size > 1 else 0.0,
           "spearman": M.spearman(t, p), "pearson_log": M.pearson_log(t, p)}
    for th in THRESHOLDS_PCT:
        row[f"share_le_{int(th)}"] = float(np.mean(a <= th))
    return row


METRIC_NAMES = ("mape", "median_ape", "sd_ape", "spearman", "pearson_log",
                *(f"share_le_{int(t)}" for t in THRESHOLDS_PCT))


def paper_metrics(pred: pd.DataFrame, by: Sequence[str] = ("method",)) -> pd.DataFrame:
    """Metrics per group of ``by`` (per seed, then mean and sd over seeds).

    Columns: by..., n_seeds, n, n_gpus, n_workloads, then ``<metric>`` (mean over seeds) and
    ``<metric>_sd`` (sd over seeds; 0 for one seed) for every metric of :func:`metric_row`.
    """
    rows = []
    by = list(by)
    for keys, g in pred.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        per_seed = [metric_row(s["latency_ms"], s["pred_ms"]) for _, s in g.groupby("seed", sort=True)]
        row = dict(zip(by, keys))
        row["n_seeds"] = len(per_seed)
        row["n"] = per_seed[0]["n"]
        row["n_gpus"] = int(g["gpu"].nunique())
        row["n_workloads"] = int(g[list(WORKLOAD_KEY)].drop_duplicates().shape[0])
        for m in METRIC_NAMES:
            row[m], row[f"{m}_sd"] = M.mean_sd([r[m] for r in per_seed])
        rows.append(row)
    return pd.DataFrame(rows)


def mape_by(pred: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """MAPE per group (mean over seeds of the per-seed MAPE), with row and model counts."""
    rows = []
    by = list(by)
    for keys, g in pred.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        per_seed = [M.mape(s["latency_ms"], s["pred_ms"]) for _, s in g.groupby("seed", sort=True)]
        row = dict(zip(by, keys))
        row["n_models"] = int(g["model"].nunique())
        row["n"] = int(len(g) // max(1, g["seed"].nunique()))
        row["mape"], row["mape_sd"] = M.mean_sd(per_seed)
        rows.append(row)
    return pd.DataFrame(rows)


def best_worst(pred: pd.DataFrame, scope: str, k: int = 3) -> pd.DataFrame:
    """Per method, the ``k`` best and worst values of ``scope`` (``gpu`` or ``model``) by MAPE."""
    per = mape_by(pred, ["method", scope])
    rows = []
    for method, g in per.groupby("method", sort=True):
        g = g.sort_values(["mape", scope], kind="mergesort")
        for kind, part in (("best", g.head(k)), ("worst", g.iloc[::-1].head(k))):
            for rank, r in enumerate(part.itertuples(index=False), start=1):
                rows.append({"method": method, "scope": scope, "kind": kind, "rank": rank,
                             "name": getattr(r, scope), "mape": r.mape})
    return pd.DataFrame(rows, columns=["method", "scope", "kind", "rank", "name", "mape"])


def ranking_spearman(pred: pd.DataFrame, min_gpus: int = 3) -> pd.DataFrame:
    """Per (method, seed, workload): Spearman between measured and predicted device ranking.

    Workloads with fewer than ``min_gpus`` target GPUs or constant latencies are left out.
    """
    rows = []
    for keys, g in pred.groupby(["method", "seed", *WORKLOAD_KEY], sort=True):
        if g["gpu"].nunique() < min_gpus:
            continue
        r = M.spearman(g["latency_ms"], g["pred_ms"])
        if not np.isnan(r):
            rows.append(dict(zip(["method", "seed", *WORKLOAD_KEY], keys)) | {"spearman": r})
    return pd.DataFrame(rows, columns=["method", "seed", *WORKLOAD_KEY, "spearman"])


def ranking_summary(per_workload: pd.DataFrame) -> pd.DataFrame:
    """Table 3: mean, sd, median, P10, P90 of per-workload Spearman (per seed, then mean over seeds)."""
    rows = []
    for method, g in per_workload.groupby("method", sort=True):
        stats = []
        for _, s in g.groupby("seed", sort=True):
            v = s["spearman"].to_numpy()
            stats.append({"mean": v.mean(), "sd": v.std(ddof=1) if v.size > 1 else 0.0,
                          "median": np.median(v), "p10": np.percentile(v, 10), "p90": np.percentile(v, 90),
                          "n_workloads": v.size})
        row = {"method": method, "n_seeds": len(stats), "n_workloads": int(stats[0]["n_workloads"])}
        for k in ("mean", "sd", "median", "p10", "p90"):
            row[k] = float(np.mean([s[k] for s in stats]))
        row["mean_sd_over_seeds"] = M.mean_sd([s["mean"] for s in stats])[1]
        rows.append(row)
    return pd.DataFrame(rows)


def signed_pe(y_true: Sequence[float], y_pred: Sequence[float]) -> np.ndarray:
    """Signed percentage error (pred - true) / true x 100: positive = predicted slower."""
    t = np.asarray(y_true, dtype=float)
    return (np.asarray(y_pred, dtype=float) - t) / t * 100.0


def bias_by(pred: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean signed percentage error per group (mean over seeds); columns by..., n, bias_pct."""
    rows = []
    by = list(by)
    for keys, g in pred.groupby(by, sort=True):
        keys = keys if isinstance(keys, tuple) else (keys,)
        per_seed = [float(signed_pe(s["latency_ms"], s["pred_ms"]).mean()) for _, s in g.groupby("seed")]
        rows.append(dict(zip(by, keys)) | {"n": int(len(g) // max(1, g["seed"].nunique())),
                                           "bias_pct": float(np.mean(per_seed))})
    return pd.DataFrame(rows)


def threshold_shares(pred: pd.DataFrame) -> pd.DataFrame:
    """Figure 5: share (0-1) of predictions within each APE threshold, per method (mean over seeds)."""
    rows = []
    for method, g in pred.groupby("method", sort=True):
        for th in THRESHOLDS_PCT:
            v = [M.share_within(s["latency_ms"], s["pred_ms"], th) for _, s in g.groupby("seed")]
            rows.append({"method": method, "threshold_pct": th, "share": float(np.mean(v))})
    return pd.DataFrame(rows)


def grid_mape(pred: pd.DataFrame) -> pd.DataFrame:
    """Figure 7: MAPE per (method, precision, batch size, input size)."""
    return mape_by(pred, ["method", "precision", "batch_size", "img_px"])


def host_agreement(pred_a: pd.DataFrame, pred_b: pd.DataFrame) -> pd.DataFrame:
    """Table 4: agreement of two hosts' predictions on shared (target, workload) pairs.

    Delta = (pred_a - pred_b) / pred_b x 100 (positive = host A predicts slower). Per scope (all,
    then each input size): n, mean |Delta|, bias (mean Delta), Pearson r of log predictions, share of
    |Delta| <= 20 %, and each host's MAPE against the targets on the shared pairs.
    """
    keys = ["gpu", *WORKLOAD_KEY]
    j = pred_a[[*keys, "pred_ms", "latency_ms"]].merge(pred_b[[*keys, "pred_ms"]], on=keys, suffixes=("_a", "_b"))
    if j.empty:
        raise SchemaError("the two hosts share no (target, workload) pair")
    rows = []
    scopes = [("all", j)] + [(f"{px}px", g) for px, g in j.groupby("img_px", sort=True)]
    for name, g in scopes:
        d = signed_pe(g["pred_ms_b"], g["pred_ms_a"])
        rows.append({"scope": name, "n": len(g), "mean_abs_diff_pct": float(np.abs(d).mean()),
                     "bias_pct": float(d.mean()), "pearson_log": M.pearson_log(g["pred_ms_b"], g["pred_ms_a"]),
                     "share_le_20": float(np.mean(np.abs(d) <= 20.0)),
                     "mape_a": M.mape(g["latency_ms"], g["pred_ms_a"]),
                     "mape_b": M.mape(g["latency_ms"], g["pred_ms_b"])})
    return pd.DataFrame(rows)


def generation(gpu: str, specs: pd.DataFrame | None = None) -> str:
    """'RTX 30' / 'RTX 40' / 'RTX 50' for GeForce RTX cards, else the architecture."""
    m = re.match(r"RTX-(\d)0\d0", gpu)
    if m:
        return f"RTX {m.group(1)}0"
    from traintime.specs import gpu_row
    return str(gpu_row(gpu, specs)["architecture"])


# --------------------------------------------------------------------------------------------
# Paper tables (inputs: all predictions, already free of flagged/excluded rows)
# --------------------------------------------------------------------------------------------

#: Display order of methods in tables.
METHOD_ORDER: tuple[str, ...] = ("emulation", "habitat", "neusight", "flops", "learned", "emulation_oracle")


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method.replace("_", " "))


def main_slice(pred: pd.DataFrame, precision: str, batch_size: int) -> pd.DataFrame:
    """Rows of the paper's main evaluation (one precision and batch size)."""
    return pred[(pred["precision"] == precision) & (pred["batch_size"] == batch_size)].reset_index(drop=True)


def _order(df: pd.DataFrame) -> pd.DataFrame:
    rank = {m: i for i, m in enumerate(METHOD_ORDER)}
    key = df["method"].map(lambda m: rank.get(m, len(rank)))
    return df.assign(_k=key).sort_values(["_k", "method", *[c for c in ("host_gpu",) if c in df]],
                                         kind="mergesort").drop(columns="_k").reset_index(drop=True)


def missing_notes(present: Iterable[str]) -> dict[str, str]:
    """Why each core method has no predictions (only methods absent from ``present``)."""
    notes = {"emulation": NO_HOST, "emulation_oracle": NO_HOST + " (the oracle needs a (p, f) sweep)",
             "habitat": NO_OPS, "neusight": NO_OPS}
    return {m: n for m, n in notes.items() if m not in set(present)}


def table1(pred: pd.DataFrame) -> pd.DataFrame:
    """Method comparison (main slice): pooled metrics per method and host, plus a row with a note for
    each core method without predictions."""
    cols = ["method", "label", "host_gpu", "n_seeds", "n_gpus", "n_workloads", "n", "mape", "mape_sd",
            "median_ape", "median_ape_sd", "sd_ape", "sd_ape_sd", "spearman", "spearman_sd", "pearson_log",
            "pearson_log_sd", "note"]
    t = paper_metrics(pred, ["method", "host_gpu"]) if not pred.empty else pd.DataFrame(columns=cols)
    t["note"] = ""
    t.loc[t["method"] == "learned", "note"] = ("mean +- sd over seeds (sd columns); trained on the other "
                                               "targets' measured latencies of the same workloads (not zero-shot)")
    t.loc[t["method"] == "flops", "note"] = "host = the reference GPU's public trace (unrestricted)"
    extra = [{"method": m, "host_gpu": "", "note": n} for m, n in missing_notes(t["method"]).items()]
    if extra:
        t = pd.concat([t, pd.DataFrame(extra)], ignore_index=True)
    t["label"] = t["method"].map(method_label)
    t = t.reindex(columns=cols)
    for c in ("n_seeds", "n_gpus", "n_workloads", "n"):
        t[c] = t[c].fillna(0).astype(int)
    t["host_gpu"] = t["host_gpu"].fillna("")
    return _order(t)


def table2(pred: pd.DataFrame, k: int = 3) -> pd.DataFrame:
    """Best and worst target GPUs and models by MAPE, per method (main slice)."""
    if pred.empty:
        return pd.DataFrame(columns=["method", "scope", "kind", "rank", "name", "mape"])
    return _order(pd.concat([best_worst(pred, "gpu", k), best_worst(pred, "model", k)], ignore_index=True))


def table3(pred: pd.DataFrame) -> pd.DataFrame:
    """Device-ranking Spearman per workload, summarised per method (main slice)."""
    per = ranking_spearman(pred)
    if per.empty:
        return pd.DataFrame(columns=["method", "label", "n_seeds", "n_workloads", "mean", "sd", "median", "p10", "p90"])
    t = ranking_summary(per)
    t["label"] = t["method"].map(method_label)
    return _order(t[["method", "label", "n_seeds", "n_workloads", "mean", "sd", "median", "p10", "p90",
                     "mean_sd_over_seeds"]])


def table4(emulation_pred: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Two-host agreement of the emulation predictions; (table, note). Hosts A and B are the two
    hosts sorted by name (the pair with most shared predictions when more than two)."""
    hosts = sorted(emulation_pred["host_gpu"].unique()) if not emulation_pred.empty else []
    if len(hosts) < 2:
        why = NO_HOST if not hosts else (f"host measurements present for one host only ({hosts[0]}): "
                                         "Table 4 needs two hosts")
        return pd.DataFrame({"scope": ["all"], "note": [why]}), why
    best = None
    for i, a in enumerate(hosts):
        for b in hosts[i + 1:]:
            pa = emulation_pred[emulation_pred["host_gpu"] == a]
            pb = emulation_pred[emulation_pred["host_gpu"] == b]
            n = len(pa.merge(pb, on=["gpu", *WORKLOAD_KEY]))
            if n and (best is None or n > best[0]):
                best = (n, a, b, pa, pb)
    if best is None:
        why = f"hosts {', '.join(hosts)} share no (target, workload) pair"
        return pd.DataFrame({"scope": ["all"], "note": [why]}), why
    _, a, b, pa, pb = best
    t = host_agreement(pa, pb)
    t.insert(0, "host_b", b)
    t.insert(0, "host_a", a)
    return t, f"Delta = (prediction of {a} - prediction of {b}) / prediction of {b}; positive = {a} predicts slower."


def table5(pred: pd.DataFrame) -> pd.DataFrame:
    """MAPE by model family per method (main slice)."""
    if pred.empty:
        return pd.DataFrame(columns=["method", "family", "n_models", "n", "mape", "mape_sd"])
    return _order(mape_by(pred, ["method", "family"]))


def per_target(pred: pd.DataFrame) -> pd.DataFrame:
    """MAPE per method and target GPU (main slice), for the per-target bars."""
    if pred.empty:
        return pd.DataFrame(columns=["method", "gpu", "n_models", "n", "mape", "mape_sd"])
    return _order(mape_by(pred, ["method", "gpu"]))


def bias_table(pred: pd.DataFrame, specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Figure 6: bias per method, target generation and input size (main slice)."""
    if pred.empty:
        return pd.DataFrame(columns=["method", "generation", "img_px", "n", "bias_pct"])
    gens = {g: generation(g, specs) for g in pred["gpu"].unique()}
    return _order(bias_by(pred.assign(generation=pred["gpu"].map(gens)), ["method", "generation", "img_px"]))


def scope_note(cfg: dict, pred: pd.DataFrame, manifest: pd.DataFrame | None = None,
               main: bool = True) -> str:
    """Markdown note stating what a table covers: slice, targets, hosts, cleanup policy, gaps."""
    parts = []
    if main:
        parts.append(f"Main slice: {cfg['precision']}, batch size {cfg['batch_size']}.")
    else:
        parts.append("All precisions and batch sizes of the traces.")
    if not pred.empty:
        parts.append(f"{pred['gpu'].nunique()} target GPUs, {pred['model'].nunique()} models; OOM rows excluded.")
    if manifest is not None and not manifest["present"].all():
        absent = ", ".join(sorted(manifest.loc[~manifest["present"], "gpu"]))
        parts.append(f"Trace files not available (skipped): {absent}.")
    parts.append("Rows flagged in the traces' `cleanup` column are "
                 + ("included" if cfg["include_cleanup"] else "excluded")
                 + " (config emulation.include_cleanup).")
    if cfg["exclude_models"]:
        parts.append(f"Models excluded by config: {', '.join(cfg['exclude_models'])}.")
    parts.append(f"FLOPS and learned baselines use the {cfg['reference_host']} public trace as the "
                 "unrestricted host latency.")
    hosts = sorted(pred.loc[pred["method"].str.startswith("emulation"), "host_gpu"].unique()) if not pred.empty else []
    parts.append(f"Host emulation measurements: {', '.join(hosts)}." if hosts else f"Host emulation: {NO_HOST}.")
    return " ".join(parts)
