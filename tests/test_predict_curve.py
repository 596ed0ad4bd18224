"""A partial validation curve given to the predictor (API and `traintime predict --curve`) changes the
epochs estimate to the extrapolated early-stopping epoch."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_predict_api import _predictor, saved  # noqa: F401  (fixture)

from traintime.chronos.curves import predict_stop_epoch
from traintime.cli import main
from traintime.core.errors import TraintimeError

# a slowly falling curve: the fake convergence model says 20 epochs, the curve says many more
CURVE = [2.0, 1.8, 1.65, 1.53, 1.44]


def test_partial_curve_changes_the_epochs_estimate(saved) -> None:  # noqa: F811
    base = _predictor(saved).estimate()
    assert base.epochs == 20.0
    p = _predictor(saved, curve=CURVE)
    est = p.estimate()
    # no convergence.csv in data_dir: the MLP family's released stopping settings apply
    expected = predict_stop_epoch(CURVE, 5, 1e-4, 250)
    assert est.epochs == expected != 20.0
    assert est.hours == pytest.approx(expected * est.epoch_s / 3600)
    assert any("validation curve" in n for n in est.notes)
    # the interval is the curve extrapolation's, never the convergence model's residuals: none here (no seed study)
    assert est.epochs_protocol == "curve k=5" and np.isnan(est.epochs_low) and not np.isnan(base.epochs_low)
    with pytest.raises(TraintimeError, match="positive"):
        _predictor(saved, curve=[1.0, -1.0])


@pytest.mark.slow  # two probe runs through the CLI (about a minute on a shared CPU)
def test_cli_curve_option(saved, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    models, data = saved
    base = ["predict", "--model", "mixer", "--dataset", "digits", "--optimizer", "adamw", "--batch-size", "32",
            "--learning-rate", "0.001", "--gpus", "T4", "--models-dir", str(models), "--data-dir", str(data),
            "--probe-batch-size", "8", "--device", "cpu", "--model-arg", "embed_dim=16", "--model-arg", "depth=1",
            "--json", "--convergence-method", "chronos_rf"]

    def epochs(out: str) -> float:
        return float(json.loads(out)[0]["epochs"])

    assert main(base) == 0
    without = epochs(capsys.readouterr().out)
    assert main([*base, "--curve", ",".join(map(str, CURVE))]) == 0
    with_curve = epochs(capsys.readouterr().out)
    assert without == 20.0
    assert with_curve == pytest.approx(predict_stop_epoch(CURVE, 5, 1e-4, 250))
    assert main([*base, "--curve", "1.0,abc"]) != 0
    assert "--curve" in capsys.readouterr().err
    assert np.isfinite(with_curve)


def test_curve_interval_comes_from_the_curve_extrapolation_errors(tmp_path) -> None:
    """With --curve the epochs interval is split conformal on the same k-epoch extrapolation replayed on the
    local seed-study runs (grouped by configuration), runs already stopped within k left out."""
    import math

    import pandas as pd

    from traintime.predict_plan import curve_conformal

    k, stop = 3, {"patience": 3, "min_delta": 5e-4, "max_epochs": 15}
    losses = [1.0 + math.exp(-0.3 * (t - 1)) for t in range(1, 16)]
    p = predict_stop_epoch(losses[:k], stop["patience"], stop["min_delta"], stop["max_epochs"])
    assert p > k
    # configurations a and b stop where the extrapolation says, c at twice that; a's seed 1 stopped at epoch 1
    measured = {("a", 0): p, ("a", 1): 1, ("b", 0): p, ("b", 1): p, ("c", 0): 2 * p, ("c", 1): 2 * p}
    runs = pd.DataFrame([{"run_id": r, "seed": s, "epochs_to_converge": t, "status": "converged", **stop}
                         for (r, s), t in measured.items()])
    curves = pd.DataFrame([{"run_id": r, "seed": s, "epoch": e + 1, "val_loss": v}
                           for (r, s) in measured for e, v in enumerate(losses)])
    q, note, _ = curve_conformal(tmp_path, k, 20.0, 0.9)
    assert math.isnan(q) and "none" in note  # no seed-study files
    runs.to_csv(tmp_path / "local_convergence_seed_runs.csv", index=False)
    curves.to_csv(tmp_path / "local_convergence_seed_curves.csv", index=False)
    q, note, _ = curve_conformal(tmp_path, k, 20.0, 0.9)
    # a third of the weight (configuration c) is off by a factor 2: the 90 % quantile is log 2; the run of a
    # stopped within k (off by a factor p) would have made it log p
    assert q == pytest.approx(math.log(2)) and "5 local seed-study runs (3 configurations" in note
    assert curve_conformal(tmp_path, k, 2.0, 0.9)[0] == 0.0  # the rule fired within the curve given


def test_run_stopping_rule_reaches_the_convergence_row_and_the_curve(saved) -> None:  # noqa: F811
    """The run's own early-stopping options override the released default in the convergence row (a feature of
    some convergence models) and in the curve replay; options left None keep the default."""
    from traintime.predict import FAMILY_STOPPING, stopping_settings

    data = saved[1]
    assert stopping_settings("MLP", data) == FAMILY_STOPPING["MLP"]  # no convergence.csv: the family default
    assert stopping_settings("MLP", data, overrides={"patience": 2, "max_epochs": None})["max_epochs"] == 250
    p = _predictor(saved, curve=CURVE, stopping={"patience": 2, "max_epochs": 30})
    row = p.convergence_row().iloc[0]
    assert (row["patience"], row["min_delta"], row["max_epochs"]) == (2, FAMILY_STOPPING["MLP"]["min_delta"], 30)
    assert p.predict_number_of_epochs() == predict_stop_epoch(CURVE, 2, 1e-4, 30)
