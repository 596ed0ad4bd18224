"""Merge local rows into results/data/local_*.csv (rules collect_merge_iteration, collect_merge_convergence)."""

import pandas as pd

from traintime.core.io import read_csv, write_csv
from traintime.core.workflow import run_script
from traintime.measure.local import merge_local_convergence, merge_local_iteration


def main(snakemake):
    if snakemake.rule == "collect_merge_iteration":
        merge_local_iteration(list(snakemake.input.rows), snakemake.output[0])
        return
    merge_local_convergence(list(snakemake.input.rows), snakemake.output.table)
    curves = pd.concat([read_csv(p) for p in snakemake.input.curves], ignore_index=True)
    write_csv(curves.sort_values(["run_id", "epoch"]), snakemake.output.curves)


if __name__ == "__main__":
    run_script(main, "collect_merge_iteration", globals())
