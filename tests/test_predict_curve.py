"""A partial validation curve given to the predictor (API and `traintime predict --curve`) changes the
epochs estimate to the extrapolated early-stopping epoch."""

from __future__ import annotations

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
    with pytest.raises(TraintimeError, match="positive"):
        _predictor(saved, curve=[1.0, -1.0])


@pytest.mark.slow  # two probe runs through the CLI (about a minute on a shared CPU)
def test_cli_curve_option(saved, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    models, data = saved
    base = ["predict", "--model", "mixer", "--dataset", "digits", "--optimizer", "adamw", "--batch-size", "32",
            "--learning-rate", "0.001", "--gpu", "T4", "--models-dir", str(models), "--data-dir", str(data),
            "--probe-batch-size", "8", "--device", "cpu", "--model-arg", "embed_dim=16", "--model-arg", "depth=1"]
    assert main(base) == 0
    without = capsys.readouterr().out
    assert main([*base, "--curve", ",".join(map(str, CURVE))]) == 0
    with_curve = capsys.readouterr().out

    def epochs(out: str) -> float:
        line = next(x for x in out.splitlines() if x.startswith("epochs to converge:"))
        return float(line.split()[3])

    assert epochs(without) == 20.0
    assert epochs(with_curve) == pytest.approx(predict_stop_epoch(CURVE, 5, 1e-4, 250))
    assert main([*base, "--curve", "1.0,abc"]) == 2
    assert "--curve" in capsys.readouterr().err
    assert np.isfinite(epochs(with_curve))
