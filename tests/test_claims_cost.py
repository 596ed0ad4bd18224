"""End-to-end arithmetic (step x N/B x epochs, priced per hour) and the held-out example."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.convergence import ConstantPredictor, PerFamily
from traintime.chronos.cost import (
    RunConfig,
    cost_usd,
    end_to_end_example,
    end_to_end_table,
    epoch_seconds,
    match_rows,
    steps_per_epoch,
    total_hours,
)
from traintime.core.errors import SchemaError


def test_arithmetic_against_hand_computation():
    # ResNet-50 TinyImageNet-like: N = 100000, B = 64, 77.5 ms/step, 18 epochs, 0.28 USD/h
    assert steps_per_epoch(100_000, 64) == 1562.5
    ep = epoch_seconds(77.5, 100_000, 64)
    assert ep == pytest.approx(1562.5 * 0.0775)  # 121.09375 s
    h = total_hours(18, ep)
    assert h == pytest.approx(18 * 121.09375 / 3600)  # 0.60546875 h
    assert cost_usd(h, 0.28) == pytest.approx(0.60546875 * 0.28)
    assert np.isnan(cost_usd(h, np.nan))


def test_end_to_end_table_hand_values():
    t = end_to_end_table(["T4", "A40"], 100_000, 64, {"T4": [80.0], "A40": [200.0]}, [20.0],
                         {"T4": 0.28, "A40": 0.40}, step_ms_measured={"T4": 77.5}, epochs_measured=18.0,
                         step_ms_in_sample={"T4": 78.0, "A40": 250.0}, epochs_in_sample=18.0)
    t4 = t.set_index("gpu").loc["T4"]
    hours_pred = 20 * 1562.5 * 0.080 / 3600
    hours_meas = 18 * 1562.5 * 0.0775 / 3600
    assert t4.hours_predicted == pytest.approx(hours_pred)
    assert t4.hours_measured == pytest.approx(hours_meas)
    assert t4.hours_ape_pct == pytest.approx(abs(hours_pred - hours_meas) / hours_meas * 100)
    assert t4.cost_usd_predicted == pytest.approx(hours_pred * 0.28)
    assert t4.step_ape_pct == pytest.approx(2.5 / 77.5 * 100)
    assert t4.epochs_ape_pct == pytest.approx(2 / 18 * 100)
    a40 = t[t.gpu == "A40"]
    assert a40.hours_measured.isna().all() and a40.hours_ape_pct.isna().all()  # no measurement: no error
    assert t.cost_rank_predicted.tolist() == [1, 2]


def test_match_rows_learning_rate_tolerance():
    cfg = RunConfig("resnet50", "TinyImageNet", "SGD", 64, 0.001, 16)
    df = pd.DataFrame({"model": ["resnet50"] * 3, "dataset": "TinyImageNet", "optimizer": "SGD",
                       "batch_size": [64, 64, 32], "precision_bits": 16, "learning_rate": [0.001, 0.002, 0.001]})
    assert match_rows(df, cfg).tolist() == [True, False, False]
    assert match_rows(df, cfg, learning_rate=False).tolist() == [True, True, False]


class RecordingModel:
    """Fake step-time model (test only): predicts the mean training step time; records its training rows."""

    def __init__(self, random_state=0):
        self.random_state = random_state

    def get_params(self, deep=True):
        return {"random_state": self.random_state}

    def set_params(self, **kw):
        self.random_state = kw.get("random_state", self.random_state)
        return self

    def fit(self, rows, y):
        self.train_ = rows.copy()
        self.value_ = float(np.mean(y))
        FITTED.append(self)
        return self

    def predict(self, rows):
        return np.full(len(rows), self.value_)


FITTED: list[RecordingModel] = []


class FakePredictor:
    def __init__(self, model):
        self.models = {"CNN": model}

    def predict(self, rows):
        return self.models["CNN"].predict(rows)


def test_example_refits_without_the_configuration():
    FITTED.clear()
    cfg = RunConfig("resnet50", "TinyImageNet", "SGD", 64, 0.001, 16)
    it_rows = []
    for gpu, base in (("T4", 80.0), ("A40", 250.0)):
        for lr in (0.0005, 0.001, 0.002):
            for bs in (32, 64):
                it_rows.append(dict(family="CNN", model="resnet50", dataset="TinyImageNet", optimizer="SGD",
                                    batch_size=bs, precision_bits=16, learning_rate=lr, gpu=gpu,
                                    step_time_ms=base * bs / 64, status="ok", raw_row=len(it_rows)))
    iteration = pd.DataFrame(it_rows)
    conv = pd.DataFrame({"family": "CNN", "model": "resnet50", "dataset": "TinyImageNet", "optimizer": "SGD",
                         "batch_size": [32, 64, 128], "learning_rate": 0.001, "precision_bits": 16,
                         "dataset_size": 100_000, "epochs_to_converge": [10, 18, 30]})
    specs = pd.DataFrame({"gpu": ["T4", "A40"], "aliases": [None, None], "price_per_hour_usd": [0.28, 0.40]})
    full = RecordingModel().fit(iteration, iteration.step_time_ms)
    conv_model = PerFamily(ConstantPredictor("mean")).fit(conv, conv.epochs_to_converge)
    table, info = end_to_end_example(cfg, iteration, FakePredictor(full), conv, conv_model, "constant_mean", specs)
    refit = FITTED[-1]
    assert refit is not full and len(refit.train_) == 6
    assert not match_rows(refit.train_, cfg, learning_rate=False).any()  # no GPU / lr of the config in training
    assert set(table.gpu) == {"A40", "T4"}
    t4 = table.set_index("gpu").loc["T4"]
    assert t4.step_ms_measured == 80.0
    assert t4.epochs_measured == 18.0
    assert t4.epochs_predicted == pytest.approx(20.0)  # mean of the other two runs (10, 30)
    assert t4.step_ms_predicted == pytest.approx(np.mean([40.0, 125.0]))  # batch-32 rows only
    assert info["convergence_training_runs_held_out"] == 2
    with pytest.raises(SchemaError, match="no row of"):
        end_to_end_example(RunConfig("vgg16", "TinyImageNet", "SGD", 64, 0.001, 16), iteration,
                           FakePredictor(full), conv, conv_model, "constant_mean", specs)


def test_end_to_end_markdown_has_mean_row():
    from traintime.chronos.cost import end_to_end_markdown

    t = end_to_end_table(["T4", "A40"], 1000, 10, {"T4": [10.0], "A40": [30.0]}, [10.0], {"T4": 1.0, "A40": 1.0},
                         step_ms_measured={"T4": 20.0, "A40": 30.0}, epochs_measured=10.0,
                         step_ms_in_sample={"T4": 20.0, "A40": 30.0}, epochs_in_sample=10.0)
    md = end_to_end_markdown(t, "T", "note")
    assert md.startswith("# T\n") and md.rstrip().endswith("note")
    assert "| mean over GPUs |" in md and "| 25.00 |" in md  # step APE: (50 + 0) / 2
