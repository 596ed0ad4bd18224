"""The issues' targets at a glance (traintime.core.targets): one status rule, rows read from the run's tables."""

import inspect
import json

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.curves_model import curves_table
from traintime.chronos.two_label import TARGET_STEP_MAPE
from traintime.core import targets as tg
from traintime.core.errors import SchemaError
from traintime.emulation.power_law import HOST_TARGETS_PCT

NAN = float("nan")


@pytest.mark.parametrize("value,low,high,lower,upper,status", [
    (20.0, 18.0, 22.0, None, 25.0, "yes"),
    (30.0, 28.0, 32.0, None, 25.0, "no"),
    (25.0, 20.0, 30.0, None, 25.0, "inconclusive"),
    (24.0, NAN, NAN, None, 25.0, "yes"),           # no interval (one seed, deterministic): the value decides
    (26.0, NAN, NAN, None, 25.0, "no"),
    (90.0, 88.0, 92.0, 85.0, 95.0, "yes"),         # a band (interval coverage)
    (86.0, 83.0, 89.0, 85.0, 95.0, "inconclusive"),
    (80.0, 78.0, 82.0, 85.0, 95.0, "no"),
    (5.0, 4.0, 6.0, 3.0, None, "yes"),             # at least (points better than a baseline)
    (NAN, NAN, NAN, None, 25.0, tg.NOT_EVALUATED),
])
def test_one_status_rule(value, low, high, lower, upper, status) -> None:
    assert tg.target_status(value, low, high, lower, upper) == status


def test_targets_match_the_thresholds_the_source_tables_use() -> None:
    by_goal = {t.goal: t for t in tg.TARGETS}
    for proto, target in TARGET_STEP_MAPE.items():
        assert by_goal[f"CHRONOS {proto.split()[1]}: step-time MAPE %"].upper == target
    host = {t.where.split("'")[1]: t.upper for t in tg.TARGETS if t.table == "steptime_host_power_law"}
    assert host == HOST_TARGETS_PCT
    curve = [t for t in tg.TARGETS if t.table == "convergence_curves"]
    assert [t.upper for t in curve] == [inspect.signature(curves_table).parameters["target_pct"].default]


def _toy(tmp_path, wins: bool = True, two_label_target: float = 25.0):
    """A step two-label table and the step model `auto` resolves to from a neighbour model file."""
    tables = tmp_path / "tables"
    tables.mkdir()
    rows = []
    for proto, m in (("LOGO", 20.0), ("LOMO", 45.0), ("LODO", 35.0)):
        for method, v in (("neighbour", m), ("roofline_calibrated", m + 10), ("previous: xgboost on step_time_ms", 60.0)):
            rows.append({"protocol": f"chronos {proto}", "method": method, "n_seeds": 3, "compute_mape_pct": v - 5,
                         "step_mape_pct_mean": v, "step_mape_pct_ci95_low": v - 2, "step_mape_pct_ci95_high": v + 2,
                         "target_step_mape_pct": two_label_target if proto == "LOGO" else
                         TARGET_STEP_MAPE[f"chronos {proto}"]})
    pd.DataFrame(rows).to_csv(tables / "predict_step_two_label.csv", index=False)
    (tmp_path / "models" / "steptime").mkdir(parents=True)
    model_file = tmp_path / "models" / "steptime" / "neighbour_model.json"
    model_file.write_text(json.dumps({"wins_grouped": wins}))
    return tables, tg.auto_step_name(model_file)


def test_rows_come_from_the_tables_with_the_previous_model_beside(tmp_path) -> None:
    tables, model = _toy(tmp_path)
    t = tg.targets_table(tables, model).set_index("goal")
    logo = t.loc["CHRONOS LOGO: step-time MAPE %"]
    assert (logo["reached"], logo["ci95_low"], logo["ci95_high"], logo["previous_value"]) == (20.0, 18.0, 22.0, 60.0)
    assert logo["status"] == "yes" and "`neighbour`" in logo["model"]
    assert t.loc["CHRONOS LOMO: step-time MAPE %", "status"] == "no"
    assert t.loc["CHRONOS LODO: step-time MAPE %", "status"] == "inconclusive"
    assert t.loc["CHRONOS LOGO: compute-time MAPE %", "reached"] == 15.0
    # a table this run did not write is "not evaluated", with the reason, never a number
    missing = t.loc["epochs, LOMO: MAPE %"]
    assert np.isnan(missing["reached"]) and missing["status"].startswith(tg.NOT_EVALUATED)
    md = tg.targets_markdown(tg.targets_table(tables, model))
    assert md.startswith(f"{len(tg.TARGETS)} targets: 2 met, 1 not met, 1 inconclusive, {len(tg.TARGETS) - 4} not evaluated.")


def test_the_row_follows_the_step_model_predict_uses(tmp_path) -> None:
    tables, model = _toy(tmp_path, wins=False)
    t = tg.targets_table(tables, model).set_index("goal")
    assert t.loc["CHRONOS LOGO: step-time MAPE %", "reached"] == 30.0
    assert "`roofline_calibrated`" in t.loc["CHRONOS LOGO: step-time MAPE %", "model"]


def test_an_ambiguous_query_is_an_error_not_a_pick(tmp_path) -> None:
    tables, model = _toy(tmp_path)
    df = pd.read_csv(tables / "predict_step_two_label.csv")
    pd.concat([df, df.head(1)]).to_csv(tables / "predict_step_two_label.csv", index=False)
    with pytest.raises(SchemaError, match="selects 2 rows"):
        tg.targets_table(tables, model)


def test_a_source_table_whose_target_differs_is_an_error_not_a_silent_drift(tmp_path) -> None:
    tables, model = _toy(tmp_path, two_label_target=30.0)
    with pytest.raises(SchemaError, match=r"target_step_mape_pct = 30 .* here is <= 25"):
        tg.targets_table(tables, model)


def test_an_unknown_step_model_is_named() -> None:
    with pytest.raises(SchemaError, match="'operator'"):
        tg.step_table_method("operator")


def test_sd_over_seeds_gives_the_t_interval(tmp_path) -> None:
    (tmp_path / "t").mkdir()
    pd.DataFrame([{"protocol": "cv", "method": "nested", "n_seeds": 3, "avg_model_mape_pct": 19.0,
                   "sd_pct": 1.0}]).to_csv(tmp_path / "t" / "convergence_vs_pooling.csv", index=False)
    row = tg.targets_table(tmp_path / "t", "neighbour").set_index("goal").loc["epochs, 5-fold CV: MAPE %"]
    half = 4.302652729911275 / np.sqrt(3)  # t(0.975, 2) sd / sqrt(n)
    assert row["ci95_low"] == pytest.approx(19.0 - half) and row["ci95_high"] == pytest.approx(19.0 + half)
    assert row["status"] == "inconclusive"


def test_coverage_fractions_are_reported_in_percent_against_the_85_95_band(tmp_path) -> None:
    (tmp_path / "t").mkdir()
    q = "epochs (chronos_rf, leave-one-model-out)"
    pd.DataFrame([{"quantity": q, "family": "all", "variant": "empirical quantile", "measured_coverage": 0.871},
                  {"quantity": q, "family": "all", "variant": "finite-sample (guarantee)", "measured_coverage": 1.0},
                  {"quantity": q, "family": "all", "variant": "empirical quantile, own family only (before)",
                   "measured_coverage": 0.823},
                  {"quantity": q, "family": "CNN", "variant": "empirical quantile", "measured_coverage": 0.5}]
                 ).to_csv(tmp_path / "t" / "predict_interval_coverage.csv", index=False)
    row = tg.targets_table(tmp_path / "t", "neighbour").set_index("goal").loc[
        "90 % epoch interval, leave one model out: coverage % of held-out runs"]
    assert (row["reached"], row["previous_value"], row["target"], row["status"]) == (87.1, 82.3, "85-95", "yes")
