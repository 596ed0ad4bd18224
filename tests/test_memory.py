"""Training memory: saved-activation bytes on the meta device, the estimate, the fit call and its grouped score,
and `traintime predict` setting a GPU with too little memory apart."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from traintime.cli import main
from traintime.core.errors import SchemaError
from traintime.measure.analytic import SavedTensorBytes
from traintime.measure.memory import (
    fit_usable_fraction,
    fits,
    largest_batch,
    leave_one_size_out,
    state_bytes,
    training_memory_gb,
)


def test_saved_bytes_count_each_storage_once_and_leave_parameters_out() -> None:
    """Linear(4, 8) saves its input (4 floats), ReLU its output (8 floats); the second Linear saves that same
    output again (one storage) and the weights (parameters): 48 bytes per sample at 32 bits."""
    with torch.device("meta"):
        net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        x = torch.zeros(1, 4)
    with SavedTensorBytes(net) as saved:
        net(x)
    assert saved.total == 4 * 4 + 8 * 4
    with torch.device("meta"):
        x3 = torch.zeros(3, 4)
    with SavedTensorBytes(net) as saved3:
        net(x3)
    assert saved3.total == 3 * saved.total  # grows with the batch
    with torch.no_grad(), SavedTensorBytes(net) as none:
        net(x)
    assert none.total == 0  # nothing is kept without autograd


def test_model_structure_reports_saved_bytes() -> None:
    from traintime.measure.analytic import model_structure

    with torch.device("meta"):
        net = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 8), nn.ReLU(), nn.Linear(8, 2))
    s = model_structure(net, 4, backward=False)
    assert s["saved_bytes_per_sample"] == 3 * 4 * 4 * 4 + 8 * 4


def test_training_memory_formula() -> None:
    gib = 2.0 ** 30
    got = training_memory_gb(16e6, 1e6, 10, "16")
    assert got == pytest.approx((16e6 + 1e6 * 10 * 0.5) / gib)
    assert training_memory_gb(12e6, 1e6, 10, "32") == pytest.approx((12e6 + 1e7) / gib)
    assert training_memory_gb(0, 1e6, 10, "bf16") == pytest.approx(training_memory_gb(0, 1e6, 10, "fp16"))
    assert training_memory_gb(0, 1e6, 10, "tf32") == pytest.approx(training_memory_gb(0, 1e6, 10, "32"))


def test_state_bytes_are_weights_gradients_and_optimizer_state_of_the_static_features() -> None:
    from traintime.predict_static import make_workload, static_features

    for opt, per_param in (("sgd", 12), ("adamw", 16)):
        f = static_features(make_workload("resnet18", 8, "16", opt, input_size=32, num_classes=10))
        assert state_bytes(f) == per_param * f["param_count"]


def test_largest_batch_is_the_inverse_of_the_estimate() -> None:
    p, saved, card, u = 25e6 * 12, 80e6, np.array([8.0, 24.0, 0.1, np.nan]), 0.8  # state bytes of 25 M params, SGD
    for prec in ("32", "16"):
        b = largest_batch(p, saved, prec, card, u)
        assert b[2] == 0 and np.isnan(b[3])  # not even the state fits; unknown card
        for bi, c in zip(b[:2], card[:2]):
            assert training_memory_gb(p, saved, bi, prec) <= u * c < training_memory_gb(p, saved, bi + 1, prec)
    assert largest_batch(p, saved, "16", 24.0, u) > largest_batch(p, saved, "32", 24.0, u)
    assert np.isnan(largest_batch(p, 0.0, "32", 24.0, u))


def test_fits_is_none_where_the_card_or_the_fraction_is_unknown() -> None:
    assert list(fits([7.0, 9.0, 7.0], [10.0, 10.0, np.nan], 0.8)) == [True, False, None]
    assert list(fits([7.0], [10.0], float("nan"))) == [None]


def test_fit_usable_fraction_recovers_the_threshold() -> None:
    rng = np.random.default_rng(0)
    card = rng.choice([8.0, 12.0, 24.0], 4000)
    need = card * rng.uniform(0.3, 1.3, 4000)
    oom = need > 0.8 * card
    assert fit_usable_fraction(need, card, oom) == pytest.approx(0.8, abs=0.006)


def test_leave_one_size_out_scores_held_out_sizes_and_the_no_check_baseline() -> None:
    rng = np.random.default_rng(1)
    card = rng.choice([8.0, 12.0, 24.0], 3000)
    need = card * rng.uniform(0.3, 1.3, 3000)
    runs = pd.DataFrame({"gpu": card.astype(int).astype(str), "card_gb": card, "memory_gb": need,
                         "oom": need > 0.8 * card})
    t = leave_one_size_out(runs)
    assert list(t["held_out"]) == ["8 GB", "12 GB", "24 GB", "pooled", "pooled"]
    est = t[(t["held_out"] == "pooled") & (t["method"] == "estimate")].iloc[0]
    base = t[t["method"] == "no check"].iloc[0]
    assert est["accuracy_pct"] > 99 and est["oom_caught_pct"] > 98 and est["false_alarm_pct"] < 1
    assert base["oom_caught_pct"] == 0 and base["accuracy_pct"] == pytest.approx(100 * (1 - runs["oom"].mean()))
    with pytest.raises(SchemaError, match="one card memory size"):
        leave_one_size_out(runs[runs["card_gb"] == 8.0])
    with pytest.raises(SchemaError, match="oom"):
        leave_one_size_out(runs.drop(columns="oom"))


def test_predict_sets_a_gpu_with_too_little_memory_apart(tmp_path, capsys) -> None:
    """With a usable fraction saved, a run far larger than a T4's 16 GB is listed under 'Too little memory', out of
    the ranking and the Pareto front; the H100 (80 GB) keeps it. Without the file: estimate only, no call."""
    args = ["predict", "--model", "resnet18", "--input-size", "224", "--num-classes", "10", "--batch-size", "2048",
            "--no-probe", "--epochs", "1", "--gpus", "T4,H100-PCIe", "--data-dir", str(tmp_path),
            "--models-dir", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    recs = {r["gpu"]: r for r in json.loads(capsys.readouterr().out)}
    assert recs["T4"]["fits"] is None and recs["T4"]["memory_gb"] > 16
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory_fit.json").write_text(json.dumps({"usable_fraction": 0.8, "runs": 10}))
    assert main([*args, "--json"]) == 0
    recs = {r["gpu"]: r for r in json.loads(capsys.readouterr().out)}
    assert recs["T4"]["fits"] is False and recs["T4"]["pareto"] is False
    assert recs["H100-PCIe"]["fits"] is True and recs["H100-PCIe"]["pareto"] is True
    assert 0 < recs["T4"]["max_batch"] < 2048 <= recs["H100-PCIe"]["max_batch"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Too little memory (1;" in out and "within 80% of its memory" in out and "largest batch" in out
    assert "T4" in out.split("Too little memory")[1] and "T4" not in out.split("Too little memory")[0].split("Priced")[1]
