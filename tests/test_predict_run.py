"""`traintime predict` end to end on fake saved models: probe batch = --batch-size, labelled family
warning, --json against its schema, Pareto front, unpriced GPUs apart, --plot, --no-probe."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from traintime.cli import main
from traintime.predict_plan import pareto_front

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "schemas" / "predict_output.schema.json").read_text())


@pytest.fixture()
def dirs(tmp_path, fake_models_dir):
    models = fake_models_dir({"method": "chronos_rf", "training_runs_per_family": {"CNN": 10, "MLP": 5}})
    data = tmp_path / "data"
    (data / "convergence_predictions").mkdir(parents=True)
    rng = np.random.default_rng(0)
    n = 200
    pd.DataFrame({"protocol": "lomo", "method": "chronos_rf", "seed": 0, "family": "MLP",
                  "model": [f"m{i % 10}" for i in range(n)], "epochs_measured": 20 * np.exp(rng.normal(0, 0.2, n)),
                  "epochs_predicted": 20.0}).to_csv(data / "convergence_predictions" / "chronos_rf.csv", index=False)
    return models, data


# the fake saved convergence model (saved as chronos_rf, the paper's model, which reads the probe)
MIXER = ["--model", "mixer", "--dataset", "digits", "--model-arg", "embed_dim=16", "--model-arg", "depth=1",
         "--optimizer", "adamw", "--device", "cpu", "--convergence-method", "chronos_rf"]


def test_probe_batch_equals_batch_size(dirs, monkeypatch, capsys) -> None:
    import traintime.measure.probe as probe_mod

    seen: list[int] = []
    real = probe_mod.probe_batch

    def spy(dataset, batch_size, seed=42):
        seen.append(batch_size)
        return real(dataset, batch_size, seed=seed)

    monkeypatch.setattr(probe_mod, "probe_batch", spy)
    models, data = dirs
    assert main(["predict", *MIXER, "--batch-size", "48", "--gpus", "T4,L4", "--models-dir", str(models),
                 "--data-dir", str(data)]) == 0
    out = capsys.readouterr().out
    assert seen == [48]
    assert "probe of 48 samples" in out and "chronos_rf.joblib" in out and "s wall" in out


def test_transformer_with_only_cnn_models_gets_labelled_warning(dirs, capsys) -> None:
    models, data = dirs
    assert main(["predict", "--model", "vit_tiny_patch16_224", "--dataset", "digits", "--input-size", "32",
                 "--batch-size", "4", "--device", "cpu", "--gpus", "T4", "--models-dir", str(models),
                 "--data-dir", str(data), "--convergence-method", "chronos_rf"]) == 0
    out = capsys.readouterr().out
    assert "WARNING family: Transformer" in out and "CNN, MLP" in out


def test_json_validates_and_marks_pareto_and_unpriced(dirs, capsys) -> None:
    models, data = dirs
    assert main(["predict", *MIXER, "--batch-size", "32", "--epochs", "10", "--json", "--workers", "2",
                 "--gpus", "T4,A100-PCIe-80GB,H100-PCIe,RTX-4090,GeForce RTX 4070 Mobile",
                 "--models-dir", str(models), "--data-dir", str(data)]) == 0
    captured = capsys.readouterr()
    recs = json.loads(captured.out)
    jsonschema.validate(recs, SCHEMA)
    by = {r["gpu"]: r for r in recs}
    assert set(by) == {"T4", "A100-PCIe-80GB", "H100-PCIe", "RTX-4090", "GeForce RTX 4070 Mobile"}
    assert by["RTX-4090"]["cost_usd"] is None and by["RTX-4090"]["pareto"] is False
    assert by["T4"]["cost_usd"] == pytest.approx(by["T4"]["hours"] * by["T4"]["price_per_hour_usd"])
    assert all(r["loader_ms"] is not None and r["loader_ms"] >= 0 for r in recs)
    assert by["H100-PCIe"]["step_ms"] < by["A100-PCIe-80GB"]["step_ms"]
    # priced records come first, unpriced after them
    priced = [r["price_per_hour_usd"] is not None for r in recs]
    assert priced == sorted(priced, reverse=True)
    assert "COMPUTE time" in captured.err and "loader_ms: modelled" in captured.err


def test_pareto_front() -> None:
    t = np.array([1.0, 2.0, 3.0, 2.5, np.nan])
    c = np.array([5.0, 3.0, 1.0, 4.0, 1.0])
    assert list(pareto_front(t, c)) == [True, True, True, False, False]


def test_no_probe_sort_cost_and_plot(tmp_path, capsys) -> None:
    png = tmp_path / "p.png"
    assert main(["predict", "--model", "resnet18", "--input-size", "64", "--num-classes", "10",
                 "--num-samples", "1000", "--no-probe", "--epochs", "5", "--sort", "cost", "--plot", str(png),
                 "--data-dir", str(tmp_path), "--models-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "step time shown: COMPUTE time" in out and "NOT calibrated" in out and "Unpriced GPUs" in out and "roofline" in out
    assert png.stat().st_size > 1000
    lines = out.split("Priced GPUs")[1].split("Unpriced GPUs")[0].strip().splitlines()[2:]
    costs = [float(line.split()[-2]) for line in lines if line.strip()]
    assert costs == sorted(costs)


def test_calibration_from_measured_rows_is_used_by_predict(tmp_path, capsys) -> None:
    """calibrate() on rows generated by a known roofline recovers it; predict reads the saved JSON."""
    from traintime.chronos.roofline_calibration import calibrate
    from traintime.chronos.roofline_step import RooflineStepTime
    from traintime.core.gpudb import gpu_database, gpu_rows
    from traintime.core.io import write_json
    from traintime.predict_static import make_workload, step_rows

    gpus = ["T4", "L4", "A40", "A100-PCIe-80GB", "H100-PCIe"]
    frames = []
    for b in (32, 64, 128, 256):
        r = step_rows(make_workload("resnet18", b, dataset="cifar10"), gpu_rows(gpus))
        frames.append(r)
    r = pd.concat(frames, ignore_index=True)
    truth = RooflineStepTime(0.25, 0.5, 20.0)
    rng = np.random.default_rng(0)
    table = pd.DataFrame({"family": "CNN", "model": "resnet18", "status": "ok", "gpu": r["gpu"], "batch_size": r["batch_size"],
                          "precision_bits": 32, "input_px": 32, "depth": r["layers"], "param_bytes": r["param_bytes"],
                          "optimizer_state_bytes": r["optimizer_state_bytes"],
                          "flops_train_per_batch": r["flops_train_per_batch"],
                          "act_bytes_per_sample_proxy": r["act_bytes_per_sample"],
                          "compute_time_ms": truth.predict(r) * np.exp(rng.normal(0, 0.1, len(r))),
                          "step_time_ms": 1e6})
    cal, cov = calibrate(table, gpu_database(), 0.9)
    fam = cal["families"]["CNN"]
    assert cal["measured_column"] == "compute_time_ms"
    assert fam["compute_efficiency"] == pytest.approx(0.25, rel=0.15)
    assert 0.1 < fam["step_log_halfwidth"] < 0.4  # ~1.64 x 0.1 plus model error
    assert set(cov["variant"]) == {"finite-sample (guarantee)", "empirical quantile"}
    (tmp_path / "steptime").mkdir()
    write_json(cal, tmp_path / "steptime" / "roofline_calibration.json")
    assert main(["predict", "--model", "resnet18", "--dataset", "cifar10", "--no-probe", "--gpus", "T4",
                 "--models-dir", str(tmp_path), "--data-dir", str(tmp_path), "--json"]) == 0
    cap = capsys.readouterr()
    rec = json.loads(cap.out)[0]
    assert rec["step_ms_high"] / rec["step_ms"] == pytest.approx(np.exp(fam["step_log_halfwidth"]))
    assert "calibrated on 20 CNN rows" in cap.err


def test_32_bit_cnn_on_tf32_cards_points_to_the_tf32_precision(tmp_path, capsys) -> None:
    base = ["predict", "--model", "resnet18", "--input-size", "64", "--num-classes", "10", "--no-probe",
            "--data-dir", str(tmp_path), "--models-dir", str(tmp_path)]
    assert main([*base, "--gpus", "T4,A100-PCIe-80GB,H100-PCIe"]) == 0
    out = capsys.readouterr().out
    assert "(2 of these GPUs): --precision tf32 estimates that" in out
    assert main([*base, "--gpus", "T4,V100-SXM2-16GB"]) == 0  # no TF32 tensor cores: nothing to point to
    assert "--precision tf32" not in capsys.readouterr().out
    assert main([*base, "--gpus", "T4,A100-PCIe-80GB", "--precision", "tf32"]) == 0
    out = capsys.readouterr().out
    assert "32-bit with TF32 convolutions" in out and "estimates that" not in out
    assert "their interval is the 32-bit model's" in out  # the rule's error is not in the interval: said so
    assert main([*base, "--gpus", "T4,A100-PCIe-80GB", "--precision", "bf16"]) == 0
    assert "bf16 on cards without BF16 tensor cores (before Ampere: 1 of these GPUs)" in capsys.readouterr().out


def test_no_probe_curve_gives_epochs_from_the_run_own_rule(tmp_path, capsys) -> None:
    """--no-probe --curve: epochs from the extrapolated curve under the run's own early-stopping options; the
    stopping rule that already fired within the curve needs no interval; bad options stop with one line."""
    from traintime.chronos.curves import predict_stop_epoch

    base = ["predict", "--model", "resnet18", "--input-size", "64", "--num-classes", "10", "--num-samples", "1000",
            "--no-probe", "--gpus", "T4", "--data-dir", str(tmp_path), "--models-dir", str(tmp_path), "--json"]
    falling = [2.0, 1.6, 1.4, 1.3]
    assert main([*base, "--curve", ",".join(map(str, falling)), "--patience", "2", "--max-epochs", "30"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["epochs"] == predict_stop_epoch(falling, 2, 5e-4, 30) > len(falling)  # CNN min_delta by default
    assert rec["hours"] is not None and rec["hours"] > 0
    stopped = [2.0, 1.0, 1.5, 1.6]  # best at epoch 2, no gain for 2 epochs: the rule fired at epoch 4
    assert main([*base, "--curve", ",".join(map(str, stopped)), "--patience", "2"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["epochs"] == 4 and rec["epochs_low"] == rec["epochs_high"] == 4  # exact: nothing to extrapolate
    assert main([*base, "--curve", "2,1", "--min-delta", "-1"]) != 0
    assert "--min-delta" in capsys.readouterr().err
