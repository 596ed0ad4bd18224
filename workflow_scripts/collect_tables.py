"""Probe cost (share of one epoch) and probe-batch ablation tables (rule collect_table_probe)."""

import pandas as pd

from traintime.core.io import read_csv, write_table
from traintime.core.workflow import run_script
from traintime.measure.local import (
    load_local_iteration,
    probe_ablation_table,
    probe_cost_table,
)

COST_NOTE = """
Measured on this machine's device (`gpu` column); `probe_s` = one forward + one backward pass on one
mini-batch (no optimizer step), `ntk_s` = the empirical NTK trace on top. `epoch_s` = measured step
time x N / B for the benchmark's training batch B and the dataset's N. The paper counts the probe as
one batch of an epoch (`batch_fraction_pct`; < 0.3% for N = 50,000, B = 128); the wall-clock share
(`wall_fraction_pct`) compares seconds. `paper_n_wall_fraction_pct` rescales the epoch to N = 50,000
at the same step time. Digits has N = 1,797, so one batch is a large share of its epoch.
"""

ABLATION_NOTE = """
Probe features at each probe batch size on `repeats` different mini-batches of the same freshly
initialised model: mean and sd (over mini-batches) of log10 initial loss, log10 gradient norm, the
released "NTK trace" proxy (log10 ||g||^2, exactly twice the gradient-norm feature) and the
normalised empirical NTK trace (log10; method in `ntk_method`). A smaller sd means a more stable
probe. With one or two local training runs there are too few labels to measure the convergence
error per probe batch size (the paper's ablation); this table measures the probe's stability and cost.
"""


def main(snakemake):
    probes = pd.concat([read_csv(p) for p in snakemake.input.probes], ignore_index=True)
    local = load_local_iteration(snakemake.input.iteration)
    cost = probe_cost_table(probes, local)
    write_table(cost, snakemake.output.cost, snakemake.output.cost_md,
                title="Probe cost as a share of one training epoch (local device)", note=COST_NOTE, floatfmt=".4g")
    abl = probe_ablation_table(probes)
    write_table(abl, snakemake.output.ablation, snakemake.output.ablation_md,
                title="Probe-batch ablation: stability of the probe features", note=ABLATION_NOTE, floatfmt=".4g")


if __name__ == "__main__":
    run_script(main, "collect_table_probe", globals())
