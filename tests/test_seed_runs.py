"""The seed study's runs (traintime.measure.seed_runs) skip the probe at initialisation: the study reads only the
stopping epoch and the curve, and the probe draws from its own generators, so the training must not change."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from traintime.core.config import load_config
from traintime.measure.collect import run_convergence_job

REPO = Path(__file__).resolve().parents[1]


def test_training_is_the_same_with_and_without_the_probe(tmp_path) -> None:
    col = load_config(REPO / "config.yaml", REPO / "schemas" / "config.schema.yaml")["collect"]
    col = {**col, "device": "cpu", "data_root": str(tmp_path), "probe": {**col["probe"], "ntk_projections": 1},
           "convergence": {**col["convergence"], "max_epochs": 1, "patience": 1, "probe_batch_size": 16}}
    run = {"model": "resmlp", "dataset": "digits", "optimizer": "sgd", "batch_size": 256, "learning_rate": 0.1}
    with_probe, curve = run_convergence_job(run, col)
    without, curve0 = run_convergence_job(run, col, probe_init=False)
    cols = ["epoch", "train_loss", "val_loss", "val_accuracy"]
    pd.testing.assert_frame_equal(curve[cols], curve0[cols])
    assert without["epochs_to_converge"] == with_probe["epochs_to_converge"]
    assert without["param_count"] == with_probe["param_count"]
    assert math.isfinite(with_probe["ntk_trace"]) and math.isnan(without["ntk_trace"])
    assert without["ntk_method"] == "not run" and without["probe_batch_size"] is None
