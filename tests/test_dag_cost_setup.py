"""make run's virtual-environment set-up beside the DAG's cost: kept only right before the DAG, shown in the README."""

from __future__ import annotations

import os

import pandas as pd

from traintime.core.readme import BLOCKS
from traintime.core.report import SETUP_COLUMNS, setup_record


def _venv(tmp_path, created: float, stamped: float):
    prefix = tmp_path / "venv"
    prefix.mkdir()
    for name, t in (("pyvenv.cfg", created), (".installed", stamped)):
        (prefix / name).write_text("")
        os.utime(prefix / name, (t, t))
    return prefix


def test_setup_row_only_for_an_environment_set_up_just_before_the_dag(tmp_path):
    prefix = _venv(tmp_path, 1000.0, 1130.0)
    row = setup_record(prefix, dag_start=1150.0)
    assert list(row.columns) == list(SETUP_COLUMNS) and len(row) == 1
    assert row.loc[0, "wall_s"] == 130.0 and row.loc[0, "started_at"] == 1000.0
    assert setup_record(prefix, dag_start=1130.0 + 3600).empty  # set up long before: not this make run
    assert setup_record(prefix, dag_start=1100.0).empty  # stamped after the DAG started
    assert setup_record(tmp_path / "missing", dag_start=1150.0).empty


def test_dag_cost_block_adds_the_make_run_total_when_the_setup_row_exists(tmp_path):
    cost = pd.DataFrame([{"rule": "a", "jobs": 2, "wall_s_total": 100.0, "wall_s_max": 60.0, "max_rss_mb": 10.0,
                          "cpu_s_total": 90.0, "first_start": 1200.0, "last_end": 1800.0}])
    (tmp_path / "tables").mkdir()
    (tmp_path / "logs" / "report").mkdir(parents=True)
    cost.to_csv(tmp_path / "tables" / "dag_cost.csv", index=False)
    render = BLOCKS["dag-cost"][1]
    assert "make run" not in render(tmp_path / "tables" / "dag_cost.csv").split("Slowest")[0]
    pd.DataFrame([{"step": "venv", "started_at": 1080.0, "finished_at": 1170.0, "wall_s": 90.0}]).to_csv(
        tmp_path / "logs" / "report" / "make_run_setup.csv", index=False)
    text = render(tmp_path / "tables" / "dag_cost.csv")
    assert "`make run` from a fresh clone: 12.0 min" in text and "set-up 1.5 min" in text
    assert "within issue 12's budget of 12 min" in text
    cost.assign(last_end=1830.0).to_csv(tmp_path / "tables" / "dag_cost.csv", index=False)  # 30 s later: 12.5 min
    assert "0.5 min over issue 12's budget of 12 min" in render(tmp_path / "tables" / "dag_cost.csv")
    assert "wall time from the first job's start to the last job's end 10.0 min" in text
