"""Issue 13's step-time benchmark table (traintime.chronos.step_benchmark) and its script."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traintime.chronos.step_benchmark import COLUMNS, benchmark_table, render


def _grouped() -> pd.DataFrame:
    return pd.DataFrame({
        "protocol": ["traces LOGO"] * 3 + ["chronos LOGO"] * 2 + ["traces external"],
        "method": ["neighbour", "roofline_calibrated", "roofline_assumed", "neighbour", "roofline_calibrated",
                   "neighbour_chronos_only"],
        "rows": [100, 100, 100, 40, 40, 100], "folds": [19, 19, 19, 10, 10, 1],
        "mape_pct": [10.6, 231.9, 45.5, 31.0, 41.7, 60.0],
        "fit_s_mean": [1.25, np.nan, np.nan, 0.8, 0.02, 0.5]})


def _two_label() -> pd.DataFrame:
    return pd.DataFrame({"protocol": ["chronos LOGO"] * 3, "rows": 40,
                         "method": ["neighbour", "efficiency", "previous: xgboost on step_time_ms"],
                         "step_mape_pct_mean": [31.02, 37.9, 42.49], "step_mape_pct_sd": [0.01, 0.01, 0.38]})


def _host() -> pd.DataFrame:
    return pd.DataFrame({"protocol": ["LOGO, main slice"] * 3 + ["LOGO, all settings pooled"] * 2,
                         "method": ["power_law", "flops", "learned", "power_law", "flops"], "host_gpu": "RTX-5090",
                         "rows": 10, "folds": [18, 0, 18, 18, 0], "mape_pct": [7.4, 55.0, 13.3, 7.6, 51.7],
                         "fit_s_mean": [0.02, np.nan, np.nan, 0.6, np.nan]})


def test_with_host_rows_prefer_the_learned_baseline_then_flops_scaling() -> None:
    t = benchmark_table(_grouped(), None, _host())
    host = t[t["source"] == "traces, host RTX-5090"]
    assert list(host["protocol"]) == ["LOGO, main slice", "LOGO, all settings pooled"]
    assert list(host["previous_method"]) == ["learned", "flops"]
    assert list(host["new_mape_pct"]) == [7.4, 7.6] and list(host["new_fit_s"]) == [0.02, 0.6]


def test_new_and_previous_model_side_by_side_per_protocol_and_label() -> None:
    t = benchmark_table(_grouped(), _two_label())
    assert list(t.columns) == COLUMNS
    # protocols where the new or the previous model is missing (the external check) are left out
    assert list(zip(t["protocol"], t["label"])) == [("traces LOGO", "compute"), ("chronos LOGO", "compute"),
                                                    ("chronos LOGO", "step (compute + loader wait)")]
    tr = t.iloc[0]
    assert (tr["source"], tr["new_mape_pct"], tr["previous_mape_pct"], tr["new_fit_s"]) == ("traces", 10.6, 231.9, 1.25)
    assert np.isnan(tr["previous_fit_s"])  # the saved calibration: not fitted on the folds
    step = t.iloc[2]
    assert (step["new_mape_pct"], step["new_mape_sd"], step["previous_mape_pct"]) == (31.02, 0.01, 42.49)
    assert step["previous_method"] == "xgboost on step_time_ms" and np.isnan(step["previous_fit_s"])
    assert step["new_fit_s"] == 0.8 and step["folds"] == 10  # the compute model's fit and folds


def test_compute_rows_only_without_the_two_label_table() -> None:
    assert list(benchmark_table(_grouped())["label"]) == ["compute", "compute"]


def test_a_table_without_fit_times_is_refused_by_name() -> None:
    from traintime.core.errors import SchemaError

    with pytest.raises(SchemaError, match="fit_s_mean"):
        benchmark_table(_grouped().drop(columns="fit_s_mean"))


def test_render_aligns_one_line_per_row_with_blanks_as_dashes() -> None:
    lines = render(benchmark_table(_grouped(), _two_label())).splitlines()
    assert len(lines) == 4 and lines[0].startswith("source")
    assert "10.6" in lines[1] and "1.25" in lines[1] and "231.9" in lines[1] and lines[1].endswith("-")
    assert "31.0 +- 0.0" in lines[3] and "42.5 +- 0.4" in lines[3]
    assert len({len(line) for line in lines}) == 1  # the last column is right-aligned: every line ends there


def test_fit_times_are_kept_apart_from_the_table_and_merged_back() -> None:
    from traintime.chronos.step_benchmark import split_fit_times, with_fit_times

    table, fits = split_fit_times(_grouped())
    assert "fit_s_mean" not in table.columns and list(fits.columns) == ["protocol", "method", "fit_s_mean"]
    back = with_fit_times(table, fits.iloc[:2])  # a method without a record gets NaN
    assert back["fit_s_mean"].iloc[2:].isna().all() and back["fit_s_mean"].iloc[0] == 1.25
    pd.testing.assert_frame_equal(with_fit_times(table, fits), _grouped())


def test_script_prints_what_the_rule_writes(tmp_path, capsys) -> None:
    import importlib.util
    from pathlib import Path

    from traintime.chronos.step_benchmark import split_fit_times

    tables, fits = tmp_path / "tables", tmp_path / "logs" / "predict"
    tables.mkdir()
    fits.mkdir(parents=True)
    table, times = split_fit_times(_grouped())
    table.to_csv(tables / "predict_step_grouped.csv", index=False)
    times.to_csv(fits / "step_grouped_fit_times.csv", index=False)
    _two_label().to_csv(tables / "predict_step_two_label.csv", index=False)
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "step_models.py"
    spec = importlib.util.spec_from_file_location("step_models", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out == render(benchmark_table(_grouped(), _two_label()))
