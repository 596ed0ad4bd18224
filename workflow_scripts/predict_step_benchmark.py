"""Issue 13's step-time benchmark from the run's tables: new and previous model per protocol and data source, with
the wall time of one fit (rule predict_step_benchmark; the same lines as benchmarks/step_models.py)."""

from pathlib import Path

from traintime.core.io import write_table
from traintime.core.workflow import run_script

NOTE = """
Per protocol and data source: pooled MAPE of the step model of `traintime predict` (`neighbour`) and of the previous
model on the same outer folds (compute label: the calibrated roofline, predict's step model before `neighbour`, from
results/tables/predict_step_grouped.md; CHRONOS step label: compute + loader-wait model against the one-label XGBoost on
step_time_ms, mean +- sd over seeds, from results/tables/predict_step_two_label.md; with a host measurement: the power
law against the learned XGBoost baseline, or FLOPS scaling where that was not scored, from
results/tables/steptime_host_power_law.md), and the mean wall time in seconds
of one fit on an outer training fold measured by rules predict_step_grouped and emulation_power_law on one core (a
nested model's fit includes its inner choice; blank: not fitted on the folds by those rules, see
traintime.chronos.step_benchmark).
"""


def main(snakemake):
    from traintime.chronos.step_benchmark import benchmark_from_files, render

    inp = snakemake.input
    table = benchmark_from_files(inp.grouped, inp.grouped_fit_times, inp.two_label, inp.host, inp.host_fit_times)
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="Step-time benchmark: new and previous model per protocol and data source, wall time of one fit",
                note=NOTE)
    Path(snakemake.output.txt).write_text("$ .venv/bin/python benchmarks/step_models.py\n" + render(table))


if __name__ == "__main__":
    run_script(main, "predict_step_benchmark", globals())
