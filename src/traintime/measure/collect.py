"""The local collection jobs: benchmark, probe and convergence jobs from the config, run on the local device.

Workflow scripts (``workflow_scripts/collect_*.py``) call these functions; everything the rules of
``rules/collect.smk`` produce is computed here:

* :func:`benchmark_jobs` / :func:`parse_job_id`: benchmark jobs from ``config['collect']``;
  one job = one row of the canonical ``iteration`` table (:func:`traintime.measure.timing.run_benchmark`);
* :func:`run_probe_job`: the probe-batch ablation of one (model, dataset): probe features at each
  probe batch size on ``repeats`` different mini-batches, with their costs;
* :func:`run_convergence_job`: one run to early stopping plus its probe -> one ``convergence`` row and
  its validation curve;
* :func:`merge_local_iteration`, :func:`merge_local_convergence`: the local meta-datasets
  (``results/data/local_{iteration,convergence}.csv``; validated against the canonical schemas);
* :func:`probe_cost_table`, :func:`probe_ablation_table`, :func:`analytic_crosscheck`,
  :func:`before_after_table`: the stage's result tables.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from traintime.core.errors import ConfigError

if TYPE_CHECKING:  # torch is imported only by the functions that measure
    from traintime.measure.timing import BenchmarkJob

log = logging.getLogger(__name__)

#: key of a local iteration row (one configuration on one device of one host)
LOCAL_ITERATION_KEY: tuple[str, ...] = ("host", "gpu", "model", "dataset", "input_px", "optimizer",
                                        "batch_size", "precision_bits")
#: key of a local convergence run
LOCAL_CONVERGENCE_KEY: tuple[str, ...] = ("host", "gpu", "model", "dataset", "optimizer", "learning_rate",
                                          "batch_size", "precision_bits", "seed")


# ----------------------------------------------------------------------------------------------
# jobs
# ----------------------------------------------------------------------------------------------


def benchmark_jobs(collect: Mapping[str, Any]) -> list[BenchmarkJob]:
    """Every combination of the ``collect.benchmark`` lists, in a fixed order."""
    from traintime.measure.timing import BenchmarkJob

    b = collect["benchmark"]
    return [BenchmarkJob(m, d, o, int(bs), int(p), float(b["learning_rate"]))
            for m, d, o, bs, p in itertools.product(b["models"], b["datasets"], b["optimizers"],
                                                   b["batch_sizes"], b["precisions"])]


def parse_job_id(jid: str, learning_rate: float = 1e-3) -> BenchmarkJob:
    """Inverse of :func:`traintime.measure.timing.job_id`."""
    from traintime.measure.timing import BenchmarkJob

    parts = jid.split("__")
    if len(parts) != 5 or not parts[3].startswith("b") or not parts[4].startswith("p"):
        raise ConfigError(f"benchmark job id {jid!r} is not <model>__<dataset>__<optimizer>__b<B>__p<bits>")
    try:
        return BenchmarkJob(parts[0], parts[1], parts[2], int(parts[3][1:]), int(parts[4][1:]), learning_rate)
    except ValueError:
        raise ConfigError(f"benchmark job id {jid!r}: batch size and precision must be integers") from None


def probe_targets(collect: Mapping[str, Any]) -> list[str]:
    """``<model>__<dataset>`` of every benchmarked (model, dataset)."""
    b = collect["benchmark"]
    return [f"{m}__{d}" for m, d in itertools.product(b["models"], b["datasets"])]


def convergence_run_id(run: Mapping[str, Any]) -> str:
    """``<model>__<dataset>__<optimizer>__b<B>__lr<lr>__p<bits>`` of a ``collect.convergence.runs`` entry."""
    return (f"{run['model']}__{run['dataset']}__{str(run['optimizer']).lower()}__b{int(run['batch_size'])}"
            f"__lr{float(run['learning_rate']):g}__p{int(run.get('precision', 32))}")


def convergence_run(collect: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    for run in collect["convergence"]["runs"]:
        if convergence_run_id(run) == run_id:
            return {"precision": 32, **run}
    raise ConfigError(f"no collect.convergence.runs entry has id {run_id!r}")


def _torch_threads(n: int) -> None:
    import torch

    torch.set_num_threads(max(1, int(n)))


# ----------------------------------------------------------------------------------------------
# probe jobs
# ----------------------------------------------------------------------------------------------


def run_probe_job(model: str, dataset: str, collect: Mapping[str, Any], device: Any = None) -> pd.DataFrame:
    """Probe features of a fresh ``model`` (seed ``collect.seed``) on ``repeats`` different mini-batches
    at every probe batch size: one row per (probe batch size, repeat)."""
    import torch

    from traintime.measure.datasets import dataset_info, load_dataset
    from traintime.measure.models import create_model, model_img_px, resolve_model
    from traintime.measure.probe import probe, probe_batch
    from traintime.measure.timing import (
        device_columns,
        resolve_device,
        software_versions,
    )

    dev = resolve_device(device or collect["device"])
    info = dataset_info(dataset, img_px=collect["img_px"])
    px = model_img_px(model, info.img_px)
    ds = load_dataset(dataset, root=collect["data_root"], img_px=px if info.offline else None,
                      download=collect["download"], seed=collect["seed"])
    resolved = resolve_model(model)
    p = collect["probe"]
    torch.manual_seed(collect["seed"])
    net = create_model(model, info.num_classes, px).to(dev)
    from traintime.core.specs import load_specs

    devcols = device_columns(dev, collect.get("expected_gpu"), load_specs(collect.get("gpu_specs")))
    rows = []
    for bs in p["batch_sizes"]:
        for rep in range(int(p["repeats"])):
            x, y = probe_batch(ds, int(bs), seed=int(collect["seed"]) + rep)
            r = probe(net, x.to(dev), y.to(dev), ntk=p["ntk_method"], n_projections=int(p["ntk_projections"]),
                      seed=int(collect["seed"]) + rep)
            log.info("%s/%s probe batch %d repeat %d: probe %.2f s, NTK (%s) %.2f s", model, dataset, bs, rep,
                     r.probe_time_s, r.ntk_method, r.ntk_time_s)
            rows.append({"model": resolved.spec.chronos_name if resolved.spec else resolved.name,
                         "family": resolved.family, "dataset": info.chronos_name, "input_px": int(px),
                         "dataset_size": int(info.train_size), "repeat": rep, **r.features(),
                         "gpu": devcols["gpu"], "device": devcols["device"], "synthetic": bool(info.synthetic)})
    out = pd.DataFrame(rows)
    for k, v in software_versions().items():
        out[k] = v
    return out


# ----------------------------------------------------------------------------------------------
# convergence jobs
# ----------------------------------------------------------------------------------------------


def run_convergence_job(run: Mapping[str, Any], collect: Mapping[str, Any],
                        device: Any = None, probe_init: bool = True) -> tuple[dict[str, Any], pd.DataFrame]:
    """Probe a fresh model, then train it to early stopping; return the ``convergence`` row (canonical
    columns + status, the real NTK trace, wall time, provenance) and the per-epoch curve. ``probe_init=False``
    skips the probe (its columns are empty, ``ntk_method`` ``not run``): the seed study reads only the stopping epoch
    and the curve, and the probe draws from its own generators, so the training is the same either way."""
    import platform

    import torch

    from traintime.measure.analytic import trainable_param_count
    from traintime.measure.datasets import dataset_info, load_dataset
    from traintime.measure.models import (
        create_model,
        model_arch,
        model_img_px,
        resolve_model,
    )
    from traintime.measure.probe import probe, probe_batch
    from traintime.measure.timing import (
        device_columns,
        optimizer_label,
        resolve_device,
        software_versions,
        utc_timestamp,
    )
    from traintime.measure.train import split_indices, train_to_convergence

    c = collect["convergence"]
    dev = resolve_device(device or collect["device"])
    info = dataset_info(run["dataset"], img_px=collect["img_px"])
    px = model_img_px(run["model"], info.img_px)
    ds = load_dataset(run["dataset"], root=collect["data_root"], img_px=px if info.offline else None,
                      download=collect["download"], seed=collect["seed"])
    resolved = resolve_model(run["model"])
    seed = int(collect["seed"])
    torch.manual_seed(seed)
    net = create_model(run["model"], info.num_classes, px).to(dev)
    tr_idx, _ = split_indices(len(ds), 0.2, seed)
    pr = None
    if probe_init:
        x, y = probe_batch(torch.utils.data.Subset(ds, tr_idx), int(c["probe_batch_size"]), seed=seed)
        pr = probe(net, x.to(dev), y.to(dev), ntk=collect["probe"]["ntk_method"],
                   n_projections=int(collect["probe"]["ntk_projections"]), seed=seed)
    res = train_to_convergence(net, ds, run["optimizer"], float(run["learning_rate"]), int(run["batch_size"]), dev,
                               int(run.get("precision", 32)), float(c["min_delta"]), int(c["patience"]),
                               int(c["max_epochs"]), 0.2, seed, num_workers=0)
    t = res.epochs_to_converge
    log.info("%s: %s after %d epochs (best %d) in %.1f s", convergence_run_id(run), res.status, t, res.best_epoch,
             res.wall_time_s)
    from traintime.core.specs import load_specs

    devcols = device_columns(dev, collect.get("expected_gpu"), load_specs(collect.get("gpu_specs")))
    arch = model_arch(run["model"], px)
    row: dict[str, Any] = {
        "family": resolved.family,
        "model": resolved.spec.chronos_name if resolved.spec else resolved.name,
        "dataset": info.chronos_name,
        "task": "vision_cls" if resolved.family == "Transformer" else None,
        "optimizer": optimizer_label(run["optimizer"]),
        "learning_rate": float(run["learning_rate"]),
        "batch_size": int(run["batch_size"]),
        "precision_bits": int(run.get("precision", 32)),
        "num_classes": int(info.num_classes),
        "dataset_size": int(info.train_size),
        "param_count": int(pr.param_count) if pr else trainable_param_count(net),
        **{k: arch.get(k) for k in ("embed_dim", "depth", "patch_size", "token_mlp_dim", "channel_mlp_dim")
           if resolved.family == "MLP"},
        "gradient_norm_log10": pr.gradient_norm_log10 if pr else float("nan"),
        "ntk_trace_proxy_log10": pr.ntk_trace_proxy_log10 if pr else float("nan"),
        "initial_loss_log10": pr.initial_loss_log10 if pr else float("nan"),
        "epochs_to_converge": int(t),
        "t80_close_epochs": int(math.ceil(round(0.8 * t, 9))),
        "t90_close_epochs": int(math.ceil(round(0.9 * t, 9))),
        "patience": int(c["patience"]),
        "min_delta": float(c["min_delta"]),
        "max_epochs": int(c["max_epochs"]),
        "seed": seed,
        "source": "local",
        "status": res.status,
        "best_epoch": int(res.best_epoch),
        "best_val_loss": res.best_val_loss,
        "final_val_accuracy": res.val_accuracy[-1] if res.val_accuracy else float("nan"),
        "ntk_trace": pr.ntk_trace if pr else float("nan"),
        "ntk_trace_log10": pr.ntk_trace_log10 if pr else float("nan"),
        "ntk_trace_se": pr.ntk_trace_se if pr else float("nan"),
        "ntk_method": pr.ntk_method if pr else "not run",
        "probe_batch_size": pr.probe_batch_size if pr else None,
        "probe_time_s": pr.probe_time_s if pr else float("nan"),
        "wall_time_s": res.wall_time_s,
        "mean_epoch_time_s": float(np.mean(res.epoch_time_s)) if res.epoch_time_s else float("nan"),
        "input_px": int(px),
        "message": res.message or None,
        "synthetic": bool(info.synthetic),
        "gpu": devcols["gpu"], "gpu_reported": devcols["gpu_reported"], "device": devcols["device"],
        "host": platform.node(), **software_versions(), "measured_at": utc_timestamp(),
    }
    curve = pd.DataFrame({"epoch": np.arange(1, len(res.val_loss) + 1), "train_loss": res.train_loss,
                          "val_loss": res.val_loss, "val_accuracy": res.val_accuracy,
                          "epoch_time_s": res.epoch_time_s})
    curve.insert(0, "run_id", convergence_run_id(run))
    return row, curve


