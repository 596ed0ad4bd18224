"""One (configuration, seed) of the seed study to early stopping (rule convergence_seed_run)."""

import pandas as pd

from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.measure.seed_runs import run_seed_job


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    row, curve = run_seed_job(snakemake.params.collect, snakemake.wildcards.seedrun)
    write_csv(pd.DataFrame([row]), snakemake.output.row)
    write_csv(curve, snakemake.output.curve)


if __name__ == "__main__":
    run_script(main, "convergence_seed_run", globals())
