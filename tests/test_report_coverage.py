"""`make report` includes every table and figure that the default DAG writes (issue 17.6)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from traintime.core.report_coverage import missing_from_report

REPO = Path(__file__).resolve().parents[1]


def test_missing_from_report_counts_a_table_by_csv_or_md():
    outputs = [("a", "results/tables/x.csv", False), ("a", "results/tables/x.md", True),
               ("b", "results/tables/y.csv", True), ("c", "results/tables/z.csv", False),
               ("d", "results/figures/f.png", False), ("e", "results/figures/g.png", True),
               ("f", "results/data/iteration.csv", False)]
    assert missing_from_report(outputs) == ["results/figures/f.png", "results/tables/z.csv"]


@pytest.mark.slow
def test_every_table_and_figure_of_the_default_dag_is_in_the_report(tmp_path):
    # the DAG of the default target (rule all), built by Snakemake's own code path for --report
    res = subprocess.run([sys.executable, "-m", "traintime.core.report_coverage", str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert "table/figure files are not in the report" in res.stderr, res.stderr[-3000:]
    assert res.returncode == 0 and res.stdout == "", f"not in the report:\n{res.stdout}{res.stderr[-500:]}"
    n = int(res.stderr.strip().splitlines()[-1].split("DAG's ")[1].split()[0])
    assert n >= 40  # the DAG was really built (41 table/figure files today)
