"""The README walkthrough "Add your GPU", end to end on a CPU-only machine with a FAKE GPU.

The device is faked with the documented test-only hook ``TRAINTIME_FAKE_GPU`` (the CPU reported under a
GPU name, rows labelled ``[fake ...]`` in ``gpu_reported``; traintime.measure.device_request). The steps
run the workflow scripts of the rules the README names, in order, on a tiny configuration:

1. ``collect_bench`` x 2 configurations on the "RTX-4090" (the device check records it as expected);
2. ``collect_merge_iteration`` -> local_iteration.csv (provenance ``source = local``);
3. retrain: ``predict_interval_coverage`` (the calibration behind ``traintime predict``'s step time)
   with ``collect.train_on`` released_only (before) and released_and_local (after);
4. ``traintime predict --gpu RTX-4090``: the answer changes and the header says it was trained with
   the 2 local rows from that GPU.

Nothing here is a measurement of an RTX 4090: the fake rows are CPU timings under that name.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from traintime.cli import main

REPO = Path(__file__).resolve().parents[1]
GPU = "RTX-4090"  # in the spec table, not in the CHRONOS release
JOBS = ["resmlp__digits__sgd__b8__p32", "resmlp__digits__sgd__b16__p32"]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(torch.cuda.is_available(), reason="the fake-GPU hook acts only without CUDA")]


class _Named(dict):
    """The parts of snakemake.input / output / resources the scripts use: attributes, keys(), items()."""

    __getattr__ = dict.__getitem__


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "workflow_scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _collect_config(tmp: Path) -> dict:
    return {"device": "auto", "expected_gpu": None, "data_root": str(tmp / "data_root"), "download": False,
            "img_px": 16, "num_workers": 0, "warmup_iterations": 1, "measured_iterations": 2, "seed": 42,
            "benchmark": {"learning_rate": 0.001}}


def _predict(models: Path, data: Path, capsys) -> tuple[dict, str]:
    assert main(["predict", "--model", "resmlp", "--dataset", "digits", "--batch-size", "32", "--gpu", GPU,
                 "--gpus", "T4", "--no-probe", "--epochs", "10", "--json", "--models-dir", str(models),
                 "--data-dir", str(data)]) == 0
    out = capsys.readouterr()
    return {r["gpu"]: r for r in json.loads(out.out)}, out.err


def test_add_your_gpu_walkthrough(tmp_path, mirror, monkeypatch, capsys) -> None:
    from traintime.data.chronos import normalise_iteration, write_iteration

    monkeypatch.setenv("TRAINTIME_FAKE_GPU", GPU)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    data = tmp_path / "results" / "data"
    data.mkdir(parents=True)
    raw = mirror / "chronos" / "epoch_time_prediction" / "data"
    write_iteration(normalise_iteration({f: raw / f"{f}.csv" for f in ("CNN", "MLP", "Transformer")}),
                    data / "iteration.csv")

    # 1. collect two configurations on the (fake) GPU, as rule collect_bench does
    bench = _script("collect_bench")
    rows = []
    for job in JOBS:
        out = tmp_path / "collect" / f"{job}.csv"
        bench.main(SimpleNamespace(rule="collect_bench", threads=1, wildcards=SimpleNamespace(job=job),
                                   params=SimpleNamespace(collect=_collect_config(tmp_path)),
                                   resources=_Named(gpu=1), output=[str(out)]))
        rows.append(str(out))
    # 2. merge (rule collect_merge_iteration)
    local = data / "local_iteration.csv"
    _script("collect_merge").main(SimpleNamespace(rule="collect_merge_iteration", input=_Named(rows=rows),
                                                  output=[str(local)]))
    merged = pd.read_csv(local)
    assert len(merged) == 2 and set(merged["gpu"]) == {GPU} and set(merged["source"]) == {"local"}
    assert merged["gpu_reported"].str.contains("fake").all()  # labelled: CPU timings under a GPU name

    # 3. retrain the calibration behind predict's step time: released only (before) and + local (after)
    conv = tmp_path / "convergence_predictions.csv"
    conv.write_text("protocol,method,family,model,epochs_measured,epochs_predicted\n")
    calib = _script("predict_interval_coverage")
    dirs = {}
    for train_on in ("released_only", "released_and_local"):
        models = tmp_path / train_on / "models"
        calib.main(SimpleNamespace(
            input=_Named(iteration=str(data / "iteration.csv"), local=str(local), convergence_predictions=str(conv)),
            output=_Named(calibration=str(models / "steptime" / "roofline_calibration.json"),
                          csv=str(tmp_path / train_on / "cov.csv"), md=str(tmp_path / train_on / "cov.md")),
            params=SimpleNamespace(coverage=0.9, method="chronos_rf", gpu_specs=None, train_on=train_on)))
        dirs[train_on] = models
    cal = {k: json.loads((d / "steptime" / "roofline_calibration.json").read_text()) for k, d in dirs.items()}
    assert cal["released_and_local"]["training_data"]["local_rows_per_gpu"] == {GPU: 2}
    assert cal["released_and_local"]["families"]["MLP"]["rows"] == cal["released_only"]["families"]["MLP"]["rows"] + 2

    # 4. predict on that GPU: the answer changes and says what it learnt
    before, before_err = _predict(dirs["released_only"], data, capsys)
    after, after_err = _predict(dirs["released_and_local"], data, capsys)
    assert before[GPU]["step_ms"] != after[GPU]["step_ms"]
    assert before[GPU]["trained_local_rows"] == 0 and after[GPU]["trained_local_rows"] == 2
    assert after[GPU]["trained_local_gpus"] == GPU
    assert f"step-time calibration: trained with 2 local rows from GPU {GPU}" in after_err
    assert "released rows only (collect.train_on: released_only)" in before_err
