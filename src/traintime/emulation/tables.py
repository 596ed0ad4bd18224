"""The zero-shot paper's tables (1-5), per-target errors and bias tables, from prediction frames."""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from traintime.emulation.analysis import (
    METHOD_LABELS,
    NO_HOST,
    NO_OPS,
    best_worst,
    bias_by,
    generation,
    host_agreement,
    mape_by,
    paper_metrics,
    ranking_spearman,
    ranking_summary,
)
from traintime.emulation.schema import WORKLOAD_KEY

# --------------------------------------------------------------------------------------------
# Paper tables (inputs: all predictions, already free of flagged/excluded rows)
# --------------------------------------------------------------------------------------------

#: Display order of methods in tables.
METHOD_ORDER: tuple[str, ...] = ("emulation", "habitat", "neusight", "flops", "learned", "power_law",
                                  "emulation_oracle")


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


def table1(pred: pd.DataFrame, mapping_status: pd.DataFrame | None = None) -> pd.DataFrame:
    """Method comparison (main slice): pooled metrics per method and host, plus a row with a note for
    each core method without predictions.

    ``mapping_status`` (:func:`traintime.emulation.mapping.mapping_status` of the main backend): the
    spec-mapped ``emulation`` rows get ``n_infeasible_targets`` (targets the host cannot reach within
    the mapping distance limits; they have no prediction) and a note naming them.
    """
    cols = ["method", "label", "host_gpu", "n_seeds", "n_gpus", "n_workloads", "n", "n_infeasible_targets",
            "mape", "mape_sd", "median_ape", "median_ape_sd", "sd_ape", "sd_ape_sd", "spearman", "spearman_sd",
            "pearson_log", "pearson_log_sd", "note"]
    t = paper_metrics(pred, ["method", "host_gpu"]) if not pred.empty else pd.DataFrame(columns=cols)
    t["note"] = ""
    t.loc[t["method"] == "learned", "note"] = ("mean +- sd over seeds (sd columns); trained on the other "
                                               "targets' measured latencies of the same workloads (not zero-shot)")
    t.loc[t["method"] == "flops", "note"] = "host = the reference GPU's public trace (unrestricted)"
    t.loc[t["method"] == "power_law", "note"] = ("deterministic; per-workload fit on the other targets' measured "
                                                 "latencies of the same workloads, ratio to the host (not zero-shot)")
    t["n_infeasible_targets"] = 0
    if mapping_status is not None and not mapping_status.empty:
        for host, st in mapping_status.groupby("host_gpu", sort=True):
            bad = st[st["status"] == "infeasible"]
            if bad.empty:
                continue
            why = (f"{len(bad)} target(s) infeasible for host {host} (mapping point beyond the distance "
                   f"limits, or more SMs than the host; no prediction): {', '.join(sorted(bad['gpu']))}")
            sel = (t["method"] == "emulation") & (t["host_gpu"] == host)
            if sel.any():
                t.loc[sel, "n_infeasible_targets"] = len(bad)
                t.loc[sel, "note"] = why
            else:
                t = pd.concat([t, pd.DataFrame([{"method": "emulation", "host_gpu": host,
                                                 "n_infeasible_targets": len(bad), "note": why}])],
                              ignore_index=True)
    extra = [{"method": m, "host_gpu": "", "note": n} for m, n in missing_notes(t["method"]).items()]
    if extra:
        t = pd.concat([t, pd.DataFrame(extra)], ignore_index=True)
    t["label"] = t["method"].map(method_label)
    t = t.reindex(columns=cols)
    for c in ("n_seeds", "n_gpus", "n_workloads", "n", "n_infeasible_targets"):
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
