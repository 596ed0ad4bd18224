"""Host measurement rows, long *predictions* frames and the zero-shot paper's metrics.

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
import logging
import os
import re
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from traintime.core import metrics as M
from traintime.core.errors import SchemaError
from traintime.core.io import read_csv
from traintime.core.schema import Column, TableSchema
from traintime.emulation.schema import FAMILIES, HOST_LATENCY, PRECISIONS, WORKLOAD_KEY

log = logging.getLogger(__name__)

#: Method names and their display labels (paper naming).
METHOD_LABELS: dict[str, str] = {
    "emulation": "Ours (host emulation)",
    "emulation_oracle": "Oracle (best measured host setting)",
    "habitat": "Habitat-style (light)",
    "neusight": "NeuSight-style (light)",
    "flops": "FLOPS scaling",
    "learned": "Learned cross-GPU (xgboost, LOGO)",
    "power_law": "Per-workload power law in FLOPs / bandwidth / SM ratios (LOGO)",
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

def is_host_latency_file(path: str | os.PathLike[str]) -> bool:
    """Whether a CSV's header is that of a host latency table (has ``host_gpu`` and ``latency_ms``);
    manifests, op profiles and unreadable files are not."""
    try:
        with open(path) as fh:
            header = fh.readline()
    except OSError:
        return False
    cols = [c.strip() for c in header.strip().split(",")]
    return "host_gpu" in cols and "latency_ms" in cols


def host_latency_files(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """The host latency tables among ``paths`` (see :func:`is_host_latency_file`), in order."""
    return [str(p) for p in paths if is_host_latency_file(p)]


def measurement_files(dirs: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Host latency tables (``*.csv``) in each folder of ``dirs`` and its subfolders (folder order,
    then path order); missing folders are skipped."""
    return host_latency_files(
        f for d in dirs for f in sorted(glob.glob(os.path.join(str(d), "**", "*.csv"), recursive=True)))


def file_digests(files: Sequence[str]) -> dict[str, str]:
    """sha256 of each file's content, by path (provenance of the measurements a table used)."""
    from traintime.data.retrieve import sha256_of

    return {str(f): sha256_of(f) for f in files}


def load_host_rows(files: Sequence[str], allow_synthetic: bool = False,
                   excluded: list[pd.DataFrame] | None = None) -> pd.DataFrame:
    """Validated, *trusted* host rows of ``files`` (schema ``host_latency``), with ``source_file``,
    ``check`` and ``check_reason`` columns.

    Rows whose restriction check (:mod:`traintime.emulation.trust`) failed or was skipped are
    dropped here, so they reach no table; they are appended to ``excluded`` when a list is given.
    Rows repeating a key already read from an earlier file are dropped (earlier folders win) with
    a warning. Synthetic rows are refused unless ``allow_synthetic``. No file: empty frame.
    """
    from traintime.core.specs import canonical_gpu
    from traintime.emulation.trust import trusted

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
        df, bad = trusted(df, source=str(f))
        if excluded is not None and not bad.empty:
            excluded.append(bad)
        if not df.empty:
            frames.append(df)
    if not frames:
        return pd.DataFrame(columns=[*HOST_LATENCY.names, "source_file", "check_reason"])
    out = pd.concat(frames, ignore_index=True)
    dup = out.duplicated(list(HOST_LATENCY.key), keep="first")
    if dup.any():
        log.warning("dropped %d host rows repeating a key of an earlier file", int(dup.sum()))
        out = out[~dup]
    return out.sort_values(list(HOST_LATENCY.key)).reset_index(drop=True)


def read_host_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The merged host table written by rule emulation_measurements (header only = no rows);
    untrusted rows (restriction check failed or skipped) are dropped here too."""
    df = read_csv(path)
    if df.empty:
        return pd.DataFrame(columns=[*HOST_LATENCY.names, "source_file"])
    from traintime.emulation.trust import trusted

    return trusted(HOST_LATENCY.validate(df, source=str(path)), source=str(path))[0]


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
    from traintime.core.specs import gpu_row
    return str(gpu_row(gpu, specs)["architecture"])


