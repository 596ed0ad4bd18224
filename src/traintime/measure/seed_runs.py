"""Seed-noise study: local runs to early stopping of a few configurations under several training seeds.

Configuration: ``collect.convergence.seed_study`` (``runs``: entries like ``collect.convergence.runs``;
``seeds``: training seeds; ``patience`` / ``max_epochs``: overrides of the collect settings, null to
keep them). The seed seeds the initialisation, the 80/20 split and the shuffling
(:func:`traintime.measure.train.train_to_convergence`), so the spread measured is that of the whole
training procedure at fixed hyper-parameters. Every run is also a complete validation curve for
:mod:`traintime.chronos.curves`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from traintime.core.errors import ConfigError
from traintime.measure.collect import convergence_run_id, run_convergence_job


def seed_run_ids(collect: Mapping[str, Any]) -> list[str]:
    """``<convergence run id>__s<seed>`` of every (run, seed) of the seed study."""
    study = collect["convergence"].get("seed_study") or {}
    return [f"{convergence_run_id(r)}__s{int(s)}" for r in study.get("runs", []) for s in study.get("seeds", [])]


def seed_study_collect(collect: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """A copy of ``collect`` whose seed and early-stopping settings are those of the seed study."""
    study = collect["convergence"].get("seed_study") or {}
    conv = dict(collect["convergence"])
    for key in ("patience", "max_epochs", "min_delta"):
        if study.get(key) is not None:
            conv[key] = study[key]
    return {**collect, "seed": int(seed), "convergence": conv}


def run_seed_job(collect: Mapping[str, Any], run_seed_id: str) -> tuple[dict[str, Any], pd.DataFrame]:
    """Run one (configuration, seed) of the seed study: the convergence row and its curve, both with
    ``run_id`` (configuration) and ``seed`` columns. No probe at initialisation (its columns are empty): the study
    reads the stopping epoch and the curve only."""
    base, sep, s = run_seed_id.rpartition("__s")
    study = collect["convergence"].get("seed_study") or {}
    if not sep or not s.isdigit():
        raise ConfigError(f"seed-study run id {run_seed_id!r} is not <run id>__s<seed>")
    runs = [r for r in study.get("runs", []) if convergence_run_id(r) == base]
    if not runs or int(s) not in [int(x) for x in study.get("seeds", [])]:
        raise ConfigError(f"no collect.convergence.seed_study run/seed has id {run_seed_id!r}")
    c = seed_study_collect(collect, int(s))
    row, curve = run_convergence_job(runs[0], c, probe_init=False)
    row["run_id"] = base
    curve.insert(1, "seed", int(s))
    return row, curve
