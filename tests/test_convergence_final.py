"""The saved convergence model `predict` uses: `nested` chosen on all runs by inner leave-one-model-out folds,
whether a model reads the probe, and `predict` answering epochs without a probe for a model that reads none."""

from __future__ import annotations

import json

import numpy as np
import pytest
from test_convergence_estimators import synthetic_rows

from traintime.chronos.convergence import (
    TARGET,
    ConvergencePredictor,
    make_estimator,
    reads_probe,
)
from traintime.cli import main
from traintime.data.chronos_convergence import PROBE_COLUMNS


def test_fit_all_nested_records_the_inner_choice_and_reads_no_probe() -> None:
    rows = synthetic_rows(60, seed=3)
    m = ConvergencePredictor.fit_all(rows, "nested", seed=0, protocol="lomo",
                                     candidates=["partial_pooling", "pooled_loglinear"])
    chosen = m.metadata["chosen_per_family"]
    assert set(chosen) == {"CNN", "MLP"} and m.metadata["nested_protocol"] == "lomo"
    for c in chosen.values():
        assert c["inner_group"] == "model" and c["estimator"] in ("partial_pooling", "pooled_loglinear")
        # the choice is the lowest inner MAPE (ties: the earlier candidate)
        assert c["estimator"] == min(c["inner_mape_pct"], key=c["inner_mape_pct"].get)
    assert m.reads_probe is False and m.metadata["reads_probe"] is False
    assert m.chosen_text() == ", ".join(f"{f}: {chosen[f]['estimator']}" for f in sorted(chosen))
    # it reads no probe column: emptying them leaves every prediction unchanged
    blank = rows.assign(**{c: np.nan for c in PROBE_COLUMNS})
    np.testing.assert_array_equal(m.predict(blank), m.predict(rows))


@pytest.mark.parametrize("method, expected", [("chronos_rf", True), ("no_probe_rf", False), ("ntk_guided", True),
                                              ("partial_pooling", False), ("pooled_or_xgb", False),
                                              ("xgb_probe", True), ("scaling_law", False)])
def test_reads_probe_per_estimator(method: str, expected: bool) -> None:
    rows = synthetic_rows(40)
    est = make_estimator(method).fit(rows, rows[TARGET].to_numpy(dtype=float))
    assert reads_probe(est) is expected


def test_nested_reads_the_probe_when_its_choice_does() -> None:
    rows = synthetic_rows(60, seed=3)
    m = ConvergencePredictor.fit_all(rows, "nested", protocol="lomo", candidates=["xgb_probe"])
    assert m.reads_probe is True


def test_unknown_estimator_type_counts_as_reading_the_probe() -> None:
    assert reads_probe(object()) is True


@pytest.fixture()
def nested_models(tmp_path):
    models, data = tmp_path / "models", tmp_path / "data"
    (models / "convergence").mkdir(parents=True)
    data.mkdir()
    rows = synthetic_rows(60, seed=3)
    ConvergencePredictor.fit_all(rows, "nested", protocol="lomo", candidates=["partial_pooling", "pooled_loglinear"]
                                 ).save(str(models / "convergence" / "nested.joblib"))
    return models, data


def test_predict_no_probe_answers_epochs_from_a_model_that_reads_no_probe(nested_models, monkeypatch, capsys,
                                                                         tmp_path) -> None:
    import traintime.predict as predict_mod

    def no_probe(self):  # spy: the probe must never run
        raise AssertionError("the probe ran")

    monkeypatch.setattr(predict_mod.TrainingTimePredictor, "run_probe", no_probe)
    monkeypatch.setenv("TRAINTIME_CACHE", str(tmp_path / "cache"))
    models, data = nested_models
    argv = ["predict", "--model", "resnet18", "--dataset", "cifar10", "--batch-size", "64", "--gpus", "T4",
            "--models-dir", str(models), "--data-dir", str(data), "--json"]
    answers = []
    for extra in (["--no-probe"], ["--no-probe"], []):  # computed, from the cache, and without --no-probe
        assert main([*argv, *extra]) == 0
        cap = capsys.readouterr()
        answers.append(json.loads(cap.out)[0]["epochs"])
        assert "no probe: the model reads no probe feature" in cap.err and "chosen per family: CNN:" in cap.err
    assert answers[0] is not None and answers[0] > 0 and answers[0] == answers[1] == answers[2]
    # the second answer came from the cache: the model's card and the epochs of this row are stored there
    names = {p.name.rsplit("-", 1)[0] for p in (tmp_path / "cache").glob("*.json")}
    assert {"convergence-card", "convergence-epochs"} <= names


def test_predict_no_probe_leaves_epochs_out_for_a_model_that_reads_the_probe(nested_models, capsys) -> None:
    models, data = nested_models
    rows = synthetic_rows(40)
    ConvergencePredictor.fit_all(rows, "chronos_rf").save(str(models / "convergence" / "chronos_rf.joblib"))
    assert main(["predict", "--model", "resnet18", "--dataset", "cifar10", "--gpus", "T4", "--no-probe", "--json",
                 "--models-dir", str(models), "--data-dir", str(data), "--convergence-method", "chronos_rf"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)[0]["epochs"] is None
    assert "epochs: not predicted (--no-probe, and the convergence model" in cap.err
