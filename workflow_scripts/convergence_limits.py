"""What limits epoch accuracy on the released data: per-group oracle bounds and LOMO with an oracle model level
(rule convergence_limits)."""

import pandas as pd

from traintime.chronos.convergence_limits import convergence_limits
from traintime.chronos.convergence_protocols import PREDICTIONS
from traintime.core.io import read_csv, write_table
from traintime.core.workflow import run_script
from traintime.data.chronos_convergence import load_convergence

NOTE = """
Released CHRONOS convergence runs (one seed per learning rate x batch size of each (model, dataset,
optimizer) group). Every figure is the paper's Average: the mean of the per-model MAPEs of its nine models,
per family and over all nine (`9 paper models`).

5-fold CV rows (no model fitted): `group_oracle_constant` is the MAPE of the best single value per group chosen
on the group's own runs: no predictor that gives the runs of a group one value (a lookup table, partial
pooling) can score below it, even fitted on the test rows. `group_median_all_runs`: the group median, test row
included; `group_median_other_runs`: the median of the group's other runs. Going below the oracle needs the
learning-rate and batch-size effects inside a group, learned from one seed per grid point.

LOMO rows: each method's out-of-fold leave-one-model-out predictions as evaluated (`lomo_as_measured`) and
divided by the held-out model's geometric-mean ratio predicted / measured (`lomo_model_offset_oracle`: an oracle
that knew how much longer or shorter that model trains on average). What remains is how the unseen model's
epochs vary over datasets, optimizers, learning rates and batch sizes; no estimate of the model's level
removes it. Mean +- sd over seeds. Targets: issue 14 (5-fold CV <= 18 %, LOMO <= 25 %).
See traintime.chronos.convergence_limits.
"""


def main(snakemake):
    preds = pd.concat([PREDICTIONS.validate(read_csv(p), source=p) for p in snakemake.input.predictions],
                      ignore_index=True)
    table = convergence_limits(load_convergence(snakemake.input.table), preds)
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="What limits epochs-to-converge accuracy on the released data", note=NOTE)


if __name__ == "__main__":
    run_script(main, "convergence_limits", globals())
