"""Local rows train the saved predictors (traintime.measure.training_rows, collect.train_on): provenance
kept, released-only switch, convergence runs filtered by status, metadata recorded, and `traintime
predict` saying what its models were trained with (header and --json); --gpu-specs adds / overrides
GPU rows with a price."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest

from traintime.cli import main
from traintime.core.errors import ConfigError
from traintime.measure.training_rows import combine_rows, trained_with_line

REPO = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((REPO / "schemas" / "predict_output.schema.json").read_text())


def _released() -> pd.DataFrame:
    return pd.DataFrame({"source": "chronos-release", "family": "MLP", "status": "ok", "gpu": ["T4", "L4"],
                         "step_time_ms": [1.0, 2.0], "raw_row": [1, 2]})


def _local() -> pd.DataFrame:
    return pd.DataFrame({"source": "local", "family": "MLP", "status": ["ok", "ok", "oom"],
                         "gpu": ["RTX-4090", "cpu", "RTX-4090"], "step_time_ms": [0.5, 9.0, None],
                         "host": "me", "torch": "2.x"})


def test_combine_keeps_provenance_and_counts_local_rows() -> None:
    table, s = combine_rows(_released(), _local(), "released_and_local")
    assert list(table["source"]) == ["chronos-release", "chronos-release", "local", "local"]
    assert list(table.columns) == list(_released().columns)  # local-only columns (host, versions) dropped
    assert list(table["raw_row"]) == [1, 2, 3, 4]
    assert s == {"train_on": "released_and_local", "released_rows": 2, "local_rows": 2,
                 "local_gpus": ["RTX-4090", "cpu"], "local_rows_per_gpu": {"RTX-4090": 1, "cpu": 1}}
    alone, _ = combine_rows(_released().iloc[:0], _local(), "released_and_local")  # an empty release: rows from 1
    assert list(alone["raw_row"]) == [1, 2] and list(alone["source"]) == ["local", "local"]
    only, s0 = combine_rows(_released(), _local(), "released_only")
    assert len(only) == 2 and s0["local_rows"] == 0
    with pytest.raises(ConfigError, match="collect.train_on"):
        combine_rows(_released(), _local(), "everything")


def test_convergence_runs_count_when_converged_or_capped() -> None:
    local = pd.DataFrame({"family": "MLP", "status": ["converged", "max_epochs", "diverged"], "gpu": "T4",
                          "epochs_to_converge": [3, 5, 1]})
    _, s = combine_rows(pd.DataFrame({"family": ["MLP"], "epochs_to_converge": [9]}), local,
                        "released_and_local", kind="convergence")
    assert s["local_rows"] == 2


def test_trained_with_line() -> None:
    meta = {"training_data": {"train_on": "released_and_local", "released_rows": 10, "local_rows": 2,
                              "local_gpus": ["RTX-4090"]}}
    assert trained_with_line("m", meta) == "m: trained with 2 local rows from GPU RTX-4090 (+ 10 released rows)"
    assert "released rows only" in trained_with_line("m", {"training_data": {"local_rows": 0, "released_rows": 3}})
    assert "no saved model file" in trained_with_line("m", None)
    cpu_only = {"training_data": {"local_rows": 0, "released_rows": 3, "left_out_local_rows": 4,
                                  "left_out_devices": ["cpu"]}}
    assert trained_with_line("m", cpu_only) == ("m: trained on 3 released rows only "
                                                "(4 local rows left out: cpu has no GPU specs, so no roofline)")


class _Input(dict):
    """Minimal snakemake.input: attribute access and keys()."""

    __getattr__ = dict.__getitem__


def test_convergence_model_script_trains_on_released_plus_local(tmp_path, mirror) -> None:
    """workflow_scripts/convergence_model.py: local runs enter the fit and the card; released_only not."""
    import importlib.util
    from types import SimpleNamespace

    from traintime.core.io import write_csv
    from traintime.data.chronos_convergence import (
        normalise_convergence,
        write_convergence,
    )

    raw = {f: mirror / "chronos" / "epoch_convergence_prediction" / "data" / f"{f}.csv"
           for f in ("CNN", "MLP", "Transformer")}
    released = normalise_convergence(raw)
    write_convergence(released, tmp_path / "convergence.csv")
    local = released[released["family"] == "MLP"].head(3).copy()
    local["epochs_to_converge"] = [60, 61, 62]
    local["source"], local["status"], local["gpu"] = "local", ["converged", "max_epochs", "diverged"], "RTX-4090"
    local["raw_row"] = [1, 2, 3]
    write_csv(local, tmp_path / "local_convergence.csv")  # as merge_local_convergence writes it (extra columns kept)
    spec = importlib.util.spec_from_file_location("convergence_model",
                                                  REPO / "workflow_scripts" / "convergence_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    cards = {}
    for train_on in ("released_and_local", "released_only"):
        out = tmp_path / train_on
        sm = SimpleNamespace(input=_Input(table=str(tmp_path / "convergence.csv"),
                                          local=str(tmp_path / "local_convergence.csv")),
                             output=SimpleNamespace(model=str(out / "m.joblib"), card=str(out / "m.json")),
                             params=SimpleNamespace(method="scaling_law", seed=0, train_on=train_on,
                                                    protocol="lomo", candidates=None))
        script.main(sm)
        cards[train_on] = json.loads((out / "m.json").read_text())
    both, only = cards["released_and_local"], cards["released_only"]
    assert both["training_data"]["local_rows"] == 2 and both["training_data"]["local_gpus"] == ["RTX-4090"]
    assert both["n_training_runs"] == len(released) + 2
    assert only["training_data"]["local_rows"] == 0 and only["n_training_runs"] == len(released)


@pytest.fixture()
def dirs(tmp_path, fake_models_dir):
    models = fake_models_dir({"method": "chronos_rf", "training_runs_per_family": {"MLP": 5},
                              "training_data": {"train_on": "released_and_local", "released_rows": 324,
                                                "local_rows": 3, "local_gpus": ["RTX-4090"]}})
    data = tmp_path / "data"
    data.mkdir()
    return models, data


MIXER = ["predict", "--model", "mixer", "--dataset", "digits", "--model-arg", "embed_dim=16", "--model-arg",
         "depth=1", "--device", "cpu", "--batch-size", "32", "--convergence-method", "chronos_rf"]


def test_predict_header_and_json_say_what_the_models_learnt(dirs, capsys) -> None:
    models, data = dirs
    assert main([*MIXER, "--gpus", "T4", "--json", "--models-dir", str(models), "--data-dir", str(data)]) == 0
    captured = capsys.readouterr()
    head = captured.err  # the header lines (stdout without --json: the same lines above the table)
    assert "epochs (convergence) model: trained with 3 local rows from GPU RTX-4090 (+ 324 released rows)" in head
    assert "step-time calibration: no saved model file" in head
    recs = json.loads(captured.out)
    jsonschema.validate(recs, SCHEMA)
    assert recs[0]["trained_local_rows"] == 3 and recs[0]["trained_local_gpus"] == "RTX-4090"


def test_gpu_specs_file_adds_a_priced_gpu_and_overrides_a_price(tmp_path, capsys) -> None:
    from traintime.core.specs import load_specs

    specs = load_specs()
    mine = specs[specs["gpu"] == "T4"].copy()
    mine["gpu"], mine["aliases"] = "MyLab-Card-X", "my lab card"
    price_cols = ["price_per_hour_usd", "price_provider", "price_date", "price_source"]
    mine[price_cols] = [0.77, "my lab", "2026-01", "internal quote"]
    t4 = specs[specs["gpu"] == "T4"].copy()
    t4["price_per_hour_usd"], t4["price_date"], t4["price_source"] = 9.5, "2026-02", "test override"
    path = tmp_path / "my_gpus.csv"
    pd.concat([mine, t4]).to_csv(path, index=False)
    args = ["predict", "--model", "resnet18", "--input-size", "32", "--num-classes", "10", "--num-samples", "1000",
            "--no-probe", "--epochs", "5", "--json", "--gpus", "T4,L4", "--data-dir", str(tmp_path),
            "--models-dir", str(tmp_path)]
    assert main([*args, "--gpu", "MyLab-Card-X", "--gpu-specs", str(path)]) == 0
    by = {r["gpu"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(by) == {"T4", "L4", "MyLab-Card-X"}
    x = by["MyLab-Card-X"]
    assert x["step_ms"] > 0 and x["price_per_hour_usd"] == 0.77 and x["price_date"] == "2026-01"
    assert x["cost_usd"] == pytest.approx(x["hours"] * 0.77)
    assert by["T4"]["price_per_hour_usd"] == 9.5 and by["T4"]["price_source"] == "test override"
    # without the file the name is unknown: one-line error
    assert main([*args, "--gpu", "MyLab-Card-X"]) != 0
    assert main([*args, "--gpu-specs", str(tmp_path / "missing.csv")]) == 2
    err = capsys.readouterr().err
    assert "--gpu-specs" in err and "missing.csv" in err


def test_iteration_model_script_learns_local_rows_including_a_cpu(tmp_path, mirror) -> None:
    """workflow_scripts/chronos_iteration_model.py: local rows (a spec-table GPU and the CPU, which has
    no specs) join the released rows of their family; the card records them; predictions move."""
    import importlib.util
    from types import SimpleNamespace

    from traintime.chronos.estimators import load_iteration_model
    from traintime.core.io import write_csv
    from traintime.data.chronos import config_keys, normalise_iteration, write_iteration

    raw = mirror / "chronos" / "epoch_time_prediction" / "data"
    released = normalise_iteration({"MLP": raw / "MLP.csv"})
    released = released.groupby("gpu", group_keys=False).head(40).reset_index(drop=True)  # small and fast
    write_iteration(released, tmp_path / "iteration.csv")
    local = released.head(6).copy()
    local["gpu"] = ["RTX-4090"] * 4 + ["cpu"] * 2
    local["gpu_reported"] = local["gpu"]
    local["source"], local["host"] = "local", "me"
    local["step_time_ms"] = local["step_time_ms"] * 50  # far from any released GPU: the fit must move
    local["config_key"] = config_keys(local)
    local["row_id"] = [f"local:me|{k}|{i}" for i, k in enumerate(local["config_key"])]
    write_csv(local, tmp_path / "local_iteration.csv")
    spec = importlib.util.spec_from_file_location("m", REPO / "workflow_scripts" / "chronos_iteration_model.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    preds, cards = {}, {}
    for train_on in ("released_only", "released_and_local"):
        out = tmp_path / train_on
        script.main(SimpleNamespace(
            threads=1, input=_Input(table=str(tmp_path / "iteration.csv"), predictions=[],
                                    local=str(tmp_path / "local_iteration.csv")),
            output=SimpleNamespace(model=str(out / "m.joblib"), card=str(out / "m.json")),
            params=SimpleNamespace(model={"feature_set": "clean", "estimator": "xgboost"}, families=["MLP"], seed=0,
                                   clean={}, test_only={"n_estimators_scale": 0.05}, gpu_specs=None,
                                   train_on=train_on)))
        cards[train_on] = json.loads((out / "m.json").read_text())
        preds[train_on] = load_iteration_model(out / "m.joblib").predict(local.head(4))
    td = cards["released_and_local"]["training_data"]
    assert td["local_rows"] == 6 and td["local_rows_per_gpu"] == {"RTX-4090": 4, "cpu": 2}
    assert cards["released_and_local"]["families"]["MLP"]["training_rows"] == len(released) + 6
    assert cards["released_only"]["families"]["MLP"]["training_rows"] == len(released)
    assert (preds["released_and_local"] > preds["released_only"]).all()


def test_before_after_uses_a_released_only_fit_and_the_same_held_out_folds(mirror) -> None:
    """local_before_after: `before` = released rows only (not the saved model, which now learns the local
    rows), `after` = + the other local models' rows, both predicting the same held-out model's rows."""
    from traintime.chronos.evaluation import train_iteration_predictor
    from traintime.core.specs import load_specs
    from traintime.data.chronos import config_keys, normalise_iteration
    from traintime.measure.local import before_after_table

    raw = mirror / "chronos" / "epoch_time_prediction" / "data"
    released = normalise_iteration({"MLP": raw / "MLP.csv"})
    released = released.groupby(["gpu", "model"], group_keys=False).head(15).reset_index(drop=True)
    local = released[released["gpu"] == "T4"].groupby("model", group_keys=False).head(2).copy()
    local["gpu"] = "RTX-4090"
    local["step_time_ms"] = local["step_time_ms"] * 20
    local["config_key"] = config_keys(local)
    kw = dict(feature_set="clean", estimator="xgboost", seed=0, clean_options={}, n_estimators_scale=0.05)
    specs = load_specs()
    table = before_after_table(local, released, None, specs, **kw)
    ref = train_iteration_predictor(released, families=["MLP"], **{**kw, "clean_options": {"specs": specs}})
    expect = pd.Series(ref.predict(local.reset_index(drop=True)), index=range(len(local)))
    key = ["model", "dataset", "batch_size", "optimizer", "precision_bits"]
    merged = table.merge(local.assign(_ref=expect.to_numpy())[key + ["_ref"]], on=key)
    np.testing.assert_allclose(merged["before_ms"], merged["_ref"], rtol=1e-6)
    assert (table["after_ms"] > table["before_ms"]).mean() > 0.5  # the other local models' slower rows move it


def _iteration_rows(gpus: list[str], source: str) -> pd.DataFrame:
    """Minimal iteration-table rows (release columns) on ``gpus``, one per GPU."""
    n = len(gpus)
    return pd.DataFrame({"source": source, "gpu": gpus, "status": "ok", "compute_time_ms": [10.0 + i for i in range(n)],
                         "precision_bits": 32, "flops_train_per_batch": 1e9, "param_bytes": 1e6,
                         "optimizer_state_bytes": 0.0, "model": "m", "family": "CNN", "batch_size": 8, "input_px": 32,
                         "act_bytes_per_sample_proxy": 1e5, "dataset": "d", "row_id": [f"{source}{i}" for i in range(n)]})


def test_local_rows_of_gpus_with_specs_join_the_frozen_step_models_fit_and_cpu_rows_are_counted_out() -> None:
    from traintime.core.gpudb import gpu_database
    from traintime.predict_step_grouped import local_fit_rows

    specs = gpu_database()
    released = _iteration_rows(["T4", "L4"], "chronos-release")
    local = pd.concat([_iteration_rows(["RTX-4090", "RTX-4090", "cpu"], "local"),
                       _iteration_rows(["RTX-4090"], "local").assign(status="oom")], ignore_index=True)
    rows, s = local_fit_rows(released, local, specs)
    assert len(rows) == 2 and set(rows["gpu"]) == {"RTX-4090"}
    assert set(rows["source"]) == {"chronos"}  # measured as the release measures: its weight and interval source
    assert rows["measured_ms"].tolist() == [10.0, 11.0] and rows["l2_mb"].notna().all()
    assert s["local_rows"] == 2 and s["local_gpus"] == ["RTX-4090"]
    assert s["left_out_local_rows"] == 1 and s["left_out_devices"] == ["cpu"]
    assert "2 local rows from GPU RTX-4090" in trained_with_line("step-time model", {"training_data": s})
    none, s0 = local_fit_rows(released, local, specs, "released_only")
    assert none.empty and s0["local_rows"] == 0
    cpu, s1 = local_fit_rows(released, local[local["gpu"] == "cpu"], specs)
    assert cpu.empty and s1["local_rows"] == 0 and s1["left_out_local_rows"] == 1
    assert local_fit_rows(released, None, specs)[0].empty
