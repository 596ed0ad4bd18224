"""Noise floor of the release's timing labels from the learning-rate replicates (rule chronos_iteration_noise_floor)."""

from traintime.chronos.noise_floor import replicate_floor
from traintime.core.io import write_table
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration

NOTE = """
Each workload is measured on each GPU once per learning rate (three replicates); the learning rate does not
change a step's work, so the replicates' spread is noise no step-time model can explain.
`oracle_mape_pct`: the best single value per replicate group, chosen on the group's own labels - a lower bound
for any step-time model, even one fitted on the test rows. `loo_replicate_mape_pct`: each row predicted by the
median of its other replicates. A grouped error above these floors is model error, not label noise; a target
below `oracle_mape_pct` could not be met by any step-time model (issue 13's leave-one-GPU-out targets: compute
time <= 15 %, step time <= 25 %). See traintime.chronos.noise_floor.
"""


def main(snakemake):
    table = replicate_floor(load_iteration(snakemake.input.iteration))
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="Noise floor of the CHRONOS timing labels (learning-rate replicates)", note=NOTE)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_noise_floor", globals())
