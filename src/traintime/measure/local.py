"""The local meta-dataset: merge the per-job rows of the collection into validated, deduplicated tables, and the tables of the collection stage (probe cost and ablation, analytic cross-check, before/after)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError
from traintime.measure.collect import LOCAL_CONVERGENCE_KEY, LOCAL_ITERATION_KEY

# ----------------------------------------------------------------------------------------------
# merges
# ----------------------------------------------------------------------------------------------


def _read_parts(paths: Sequence[str]) -> pd.DataFrame:
    from traintime.core.io import read_csv

    parts = [read_csv(p) for p in paths]
    if not parts:
        raise SchemaError("no measurement files to merge")
    return pd.concat(parts, ignore_index=True)


def local_iteration_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Add ``row_id`` and ``config_key`` (canonical iteration definitions) to local benchmark rows."""
    from traintime.data.chronos import config_keys

    out = rows.copy()
    out["amp"] = out["amp"].map(lambda v: str(v).strip().lower() in ("true", "1"))
    out["config_key"] = config_keys(out)
    out["row_id"] = ("local:" + out["host"].astype(str) + "|" + out["config_key"] + "|lr"
                     + out["learning_rate"].map(lambda v: f"{float(v):g}"))
    return out


def validate_local_iteration(rows: pd.DataFrame, source: str = "") -> pd.DataFrame:
    """Validate local rows against the canonical ITERATION schema (``oom`` / ``error`` rows have no
    step time; the estimators use ``status == 'ok'`` rows only)."""
    from traintime.data.chronos import ITERATION

    return ITERATION.validate(rows, source=source)


def load_local_iteration(path: str) -> pd.DataFrame:
    """Read and validate ``results/data/local_iteration.csv`` (see :func:`validate_local_iteration`)."""
    from traintime.core.io import read_csv

    return validate_local_iteration(read_csv(path), source=str(path))


def merge_local_iteration(paths: Sequence[str], out_path: str) -> pd.DataFrame:
    """Merge per-job benchmark rows into ``out_path`` (validated against the canonical ITERATION
    schema; deduplicated on :data:`LOCAL_ITERATION_KEY`; atomic)."""
    from traintime.measure.merge import merge_rows

    rows = local_iteration_rows(_read_parts(paths))
    validate_local_iteration(rows, source="benchmark rows")
    first = ["row_id", "source", "family", "config_key", "status"]
    rows = rows[first + [c for c in rows.columns if c not in first]]
    merged = merge_rows(rows, out_path, LOCAL_ITERATION_KEY)
    return validate_local_iteration(merged, source=str(out_path))


def merge_local_convergence(paths: Sequence[str], out_path: str) -> pd.DataFrame:
    """Merge per-run convergence rows into ``out_path`` (validated against CONVERGENCE; ``raw_row``
    numbers the runs 1..n in key order)."""
    from traintime.data.chronos_convergence import CONVERGENCE
    from traintime.measure.merge import merge_rows

    rows = _read_parts(paths)
    rows["raw_row"] = 0
    merged = merge_rows(rows, out_path, LOCAL_CONVERGENCE_KEY)
    merged["raw_row"] = np.arange(1, len(merged) + 1)
    merged = CONVERGENCE.validate(merged, source=out_path)
    from traintime.core.io import write_csv

    write_csv(merged, out_path)
    return merged


# ----------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------


def probe_ablation_table(probes: pd.DataFrame) -> pd.DataFrame:
    """Per (model, dataset, probe batch size): mean and sd over repeats of each probe feature, the
    spread of the released proxy across batches (sd of log10) and the mean probe cost."""
    rows = []
    for (m, d, b), g in probes.groupby(["model", "dataset", "probe_batch_size"], sort=True):
        row: dict[str, Any] = {"model": m, "dataset": d, "probe_batch_size": int(b), "repeats": int(len(g))}
        for c in ("initial_loss_log10", "gradient_norm_log10", "ntk_trace_proxy_log10", "ntk_trace_log10"):
            row[f"{c}_mean"] = float(g[c].mean())
            row[f"{c}_sd"] = float(g[c].std(ddof=1)) if len(g) > 1 else 0.0
        row["ntk_method"] = ",".join(sorted(set(g["ntk_method"].astype(str))))
        row["probe_time_s_mean"] = float(g["probe_time_s"].mean())
        row["ntk_time_s_mean"] = float(g["ntk_time_s"].mean())
        rows.append(row)
    return pd.DataFrame(rows)


def probe_cost_table(probes: pd.DataFrame, local_iteration: pd.DataFrame,
                     paper_dataset_size: int = 50000, paper_batch_size: int = 128) -> pd.DataFrame:
    """Probe cost as a fraction of one epoch, per (model, dataset, probe batch size, training batch).

    ``epoch_s`` = measured step time x N / B (N = the dataset's training size, B = the training
    batch of the benchmark row). ``batch_fraction_pct`` = 1 / (N / B) (the paper's count: one batch
    of an epoch); ``wall_fraction_pct`` = probe seconds (forward + backward) / epoch seconds;
    ``wall_fraction_ntk_pct`` adds the NTK-trace time. The ``paper_*`` columns scale the epoch to
    N = 50,000 (the paper's example) at the same per-step time.
    """
    ok = local_iteration[local_iteration["status"] == "ok"]
    rows = []
    pc = probes.groupby(["model", "dataset", "probe_batch_size"], sort=True)[["probe_time_s", "ntk_time_s"]].mean()
    for (m, d, pb), t in pc.iterrows():
        bench = ok[(ok["model"] == m) & (ok["dataset"] == d)]
        for _, r in bench.sort_values("batch_size").iterrows():
            n, b = float(r["dataset_size"]), float(r["batch_size"])
            steps = n / b
            epoch_s = steps * float(r["step_time_ms"]) / 1000.0
            paper_epoch_s = paper_dataset_size / b * float(r["step_time_ms"]) / 1000.0
            rows.append({
                "model": m, "dataset": d, "gpu": r["gpu"], "probe_batch_size": int(pb),
                "train_batch_size": int(b), "dataset_size": int(n), "steps_per_epoch": steps,
                "step_time_ms": float(r["step_time_ms"]), "epoch_s": epoch_s,
                "probe_s": float(t["probe_time_s"]), "ntk_s": float(t["ntk_time_s"]),
                "batch_fraction_pct": 100.0 / steps,
                "wall_fraction_pct": 100.0 * float(t["probe_time_s"]) / epoch_s,
                "wall_fraction_ntk_pct": 100.0 * (float(t["probe_time_s"]) + float(t["ntk_time_s"])) / epoch_s,
                "paper_n_wall_fraction_pct": 100.0 * float(t["probe_time_s"]) / paper_epoch_s,
                "paper_batch_fraction_pct": 100.0 * paper_batch_size / paper_dataset_size,
            })
    return pd.DataFrame(rows)


#: (family, model, dataset) pairs of the released timing data and the kwargs that build the same net
CROSSCHECK_MODEL_KWARGS: dict[str, Sequence[dict[str, Any]]] = {
    "mixer": ({"embed_dim": 128}, {"embed_dim": 256}),
    "resmlp": ({"embed_dim": 128}, {"embed_dim": 256}),
    "asmlp": ({"embed_dim": 128}, {"embed_dim": 256}),
}


def analytic_crosscheck(released: Mapping[str, str]) -> pd.DataFrame:
    """Analytic features (meta device) vs the released columns, per released (model, dataset[, width]).

    ``released`` maps a family to its raw timing CSV. For CNN and MLP rows the compared quantity is
    ``flops_fwd_per_sample``; for Transformers ``flops_fwd_per_token`` (recomputed with CHRONOS'
    formula) and the measured forward FLOPs per sample beside CHRONOS' implied per-sample count
    (``flops_fwd_per_token x seq_len x depth``, multiply-adds). Parameters are compared too.
    """
    from traintime.core.io import read_csv
    from traintime.measure.analytic import analytic_features

    rows = []
    for family in sorted(released):
        raw = read_csv(released[family])
        keys = ["model", "dataset"] + (["embed_dim"] if family == "MLP" else [])
        first = raw.drop_duplicates(keys).sort_values(keys)
        for _, r in first.iterrows():
            model, dataset = str(r["model"]), str(r["dataset"])
            if dataset in ("IMDB", "SST2"):
                continue  # text Transformer (DistilBERT): not an image model of this project
            kwargs = {"embed_dim": int(r["embed_dim"])} if family == "MLP" else {}
            f = analytic_features(model, dataset, int(r["batch_size"]), str(r["optimizer"]), int(r["precision"]),
                                  model_kwargs=kwargs, backward=False)
            out: dict[str, Any] = {"family": family, "model": model, "dataset": dataset,
                                   "embed_dim": kwargs.get("embed_dim"), "input_px": f["img_px"],
                                   "param_count_released": int(r["param_count"]), "param_count": f["param_count"]}
            out["param_diff_pct"] = 100.0 * (f["param_count"] - r["param_count"]) / r["param_count"]
            if family == "Transformer":
                rel = float(r["flops_fwd_per_token"])
                ours = float(f["flops_fwd_per_token"])
                out.update(quantity="flops_fwd_per_token (CHRONOS formula)", released=rel, analytic=ours,
                           flops_fwd_per_sample_measured=f["flops_fwd_per_sample"],
                           chronos_implied_fwd_per_sample=rel * f["seq_len"] * f["depth"],
                           depth=f["depth"], seq_len=f["seq_len"])
            else:
                rel = float(r["flops_fwd_per_sample"])
                ours = float(f["flops_fwd_per_sample"])
                out.update(quantity="flops_fwd_per_sample", released=rel, analytic=ours,
                           flops_fwd_per_sample_measured=ours, chronos_implied_fwd_per_sample=rel,
                           depth=f["depth"], seq_len=f.get("seq_len"))
            out["diff_pct"] = 100.0 * (ours - rel) / rel
            out["measured_vs_chronos_pct"] = 100.0 * (out["flops_fwd_per_sample_measured"]
                                                      - out["chronos_implied_fwd_per_sample"]) / \
                out["chronos_implied_fwd_per_sample"]
            out["within_2pct"] = bool(abs(out["diff_pct"]) <= 2.0)
            rows.append(out)
    cols = ["family", "model", "dataset", "embed_dim", "input_px", "quantity", "released", "analytic", "diff_pct",
            "within_2pct", "flops_fwd_per_sample_measured", "chronos_implied_fwd_per_sample",
            "measured_vs_chronos_pct", "param_count_released", "param_count", "param_diff_pct", "depth", "seq_len"]
    df = pd.DataFrame(rows)[cols]
    return df.sort_values(["family", "model", "dataset", "embed_dim"], na_position="first").reset_index(drop=True)


def cpu_spec_row(specs: pd.DataFrame, name: str = "cpu") -> pd.DataFrame:
    """``specs`` plus one row for the local CPU: every numeric spec empty (unknown), so estimators that
    join GPU specs by name can featurise CPU rows (XGBoost treats the empty values as missing)."""
    if name in set(specs["gpu"]):
        return specs
    out = specs.reset_index(drop=True).copy()
    row = {c: (np.nan if pd.api.types.is_numeric_dtype(out[c]) else None) for c in out.columns}
    row.update(gpu=name, architecture="cpu", spec_source="local CPU (no GPU specs)")
    out.loc[len(out)] = row
    return out


def before_after_table(local: pd.DataFrame, released: pd.DataFrame, saved_model: Any | None, specs: pd.DataFrame,
                       feature_set: str, estimator: str, seed: int, clean_options: Mapping[str, Any],
                       n_estimators_scale: float = 1.0, group: str = "model",
                       selection: Mapping[str, Any] | None = None, selection_protocol: str = "logo") -> pd.DataFrame:
    """Predictions for the local rows before and after adding local rows to the training data.

    * ``before``: the same feature set + estimator fitted on the released rows only (``saved_model``
      None, the workflow's choice: the saved model itself now learns the local rows,
      :mod:`traintime.measure.training_rows`), or ``saved_model`` when given, predicting the local rows;
      the CPU has no GPU specs, so those features are missing for it.
    * ``after``: the same feature set + estimator refitted on released rows + the local rows of the
      *other* ``group`` values (leave one local model out), predicting the held-out group.
    * ``local_rate``: a local-only baseline, the median ms per training FLOP of the other groups'
      local rows times the held-out row's FLOPs per step.
    """
    from traintime.chronos.evaluation import train_iteration_predictor

    ok = local[local["status"] == "ok"].reset_index(drop=True)
    if ok.empty:
        raise SchemaError("no local rows with status ok to compare")
    families = sorted(set(ok["family"]))
    spec_cpu = specs
    for g in sorted(set(ok["gpu"].astype(str)) - set(specs["gpu"])):
        spec_cpu = cpu_spec_row(spec_cpu, g)
    base = released[released["family"].isin(families) & (released["status"] == "ok")]
    def fit(rows: pd.DataFrame, fams: list[str]) -> Any:
        """The saved model's procedure (fixed pair, or the nested selection) on ``rows``."""
        opts = {**clean_options, "specs": spec_cpu}
        if feature_set == "nested" or estimator == "nested":
            from traintime.chronos.selection import fit_nested_predictor

            return fit_nested_predictor(rows, fams, protocol=selection_protocol, seed=seed, selection=selection,
                                        clean_options=opts, n_estimators_scale=n_estimators_scale)
        return train_iteration_predictor(rows, families=fams, feature_set=feature_set, estimator=estimator,
                                         seed=seed, clean_options=opts, n_estimators_scale=n_estimators_scale)

    if saved_model is None:  # released rows only, the same procedure and settings as every `after` fold
        saved_model = fit(base, families)
    before = np.asarray(saved_model.predict(ok, specs=spec_cpu), dtype=float)
    after = np.full(len(ok), np.nan)
    rate = np.full(len(ok), np.nan)
    flops = pd.to_numeric(ok["flops_train_per_sample"]) * pd.to_numeric(ok["batch_size"])
    ms_per_flop = pd.to_numeric(ok["step_time_ms"]) / flops
    for val in sorted(set(ok[group].astype(str))):
        held = (ok[group].astype(str) == val).to_numpy()
        train = pd.concat([base, ok.loc[~held]], ignore_index=True)
        fams = sorted(set(ok.loc[held, "family"]))
        after[held] = fit(train, fams).predict(ok.loc[held])
        if (~held).any():
            rate[held] = float(np.median(ms_per_flop[~held])) * flops[held].to_numpy()
    meas = pd.to_numeric(ok["step_time_ms"]).to_numpy(dtype=float)
    out = pd.DataFrame({
        "model": ok["model"], "dataset": ok["dataset"], "input_px": ok["input_px"], "optimizer": ok["optimizer"],
        "batch_size": ok["batch_size"], "precision_bits": ok["precision_bits"], "gpu": ok["gpu"],
        "measured_ms": meas,
        "before_ms": before, "before_ape_pct": np.abs(before - meas) / meas * 100,
        "after_ms": after, "after_ape_pct": np.abs(after - meas) / meas * 100,
        "local_rate_ms": rate, "local_rate_ape_pct": np.abs(rate - meas) / meas * 100,
    })
    return out.sort_values(["model", "dataset", "batch_size", "optimizer"]).reset_index(drop=True)
