"""benchmark_records: Snakemake's benchmark files -> one row per job; a job too short to be sampled has no memory
(the e2e DAG run of 2026-12-04 recorded 0.02 MB for a 0.48 s job)."""

from __future__ import annotations

import math

from traintime.core.report import DAG_COST_COLUMNS, benchmark_records, dag_cost_table

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tcpu_time\trule_name\n"


def test_an_unsampled_memory_record_is_missing_not_zero(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "long.tsv").write_text(HEADER + "12.5\t0:00:12\t310.2\t900.0\t11.0\tlong\n")
    (tmp_path / "a" / "short.tsv").write_text(HEADER + "0.41\t0:00:00\t0.00\t0.00\t0.0\tshort\n")
    (tmp_path / "a" / "early.tsv").write_text(HEADER + "0.48\t0:00:00\t0.02\t0.39\t0.0\tearly\n")  # pre-exec sample
    rec = benchmark_records(tmp_path).set_index("rule")
    assert rec.loc["long", "max_rss_mb"] == 310.2
    assert math.isnan(rec.loc["short", "max_rss_mb"]) and math.isnan(rec.loc["early", "max_rss_mb"])
    cost = dag_cost_table(rec.reset_index()).set_index("rule")
    assert math.isnan(cost.loc["short", "max_rss_mb"]) and cost.loc["long", "wall_s_total"] == 12.5


def test_no_benchmark_file_gives_an_empty_cost_table(tmp_path):
    cost = dag_cost_table(benchmark_records(tmp_path))
    assert cost.empty and list(cost.columns) == list(DAG_COST_COLUMNS)
