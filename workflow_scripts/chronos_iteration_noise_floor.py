"""Noise floor of the release's timing labels from the learning-rate replicates, and the in-sample fit of model
classes (rule chronos_iteration_noise_floor)."""

from traintime.chronos.noise_floor import fit_floor, replicate_floor
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

FIT_NOTE = """
Each class of models of the time of a workload (everything but the GPU and the learning rate) on a GPU, fitted by
least squares in log time on every row of the release - in sample, the GPU a leave-one-GPU-out fold holds out
included - and scored by the MAPE of its fitted times (overall, median, per family). `workload + GPU ...`: a time
per workload plus one factor per GPU (a GPU as one speed), per GPU and family, per GPU and model, per GPU, model and
batch; `per-workload power law ...`: one intercept and one slope per spec (log10 FP32 peak, memory bandwidth, SM
count) for every workload, the functional form of the `neighbour` step model. A fit in sample is optimistic for its
class: a class whose error here is above a target (issue 13: compute time <= 15 % on GPUs never seen) cannot meet
it, short of a model outside the class. `parameters`: free parameters of the fit. See traintime.chronos.noise_floor.
"""


def main(snakemake):
    iteration = load_iteration(snakemake.input.iteration)
    write_table(replicate_floor(iteration), snakemake.output.csv, snakemake.output.md,
                title="Noise floor of the CHRONOS timing labels (learning-rate replicates)", note=NOTE)
    write_table(fit_floor(iteration), snakemake.output.fit_csv, snakemake.output.fit_md,
                title="How well model classes fit the CHRONOS timing labels in sample (every GPU included)",
                note=FIT_NOTE)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_noise_floor", globals())
