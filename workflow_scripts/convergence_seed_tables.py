"""Seed spread, curve-extrapolation MAPE and interval coverage tables (rule convergence_seed_tables)."""

from traintime.chronos.convergence_seed_tables import write_seed_tables
from traintime.core.workflow import run_script


def main(snakemake):
    write_seed_tables(list(snakemake.input.rows), list(snakemake.input.curves), list(snakemake.input.predictions),
                      dict(snakemake.output.items()), ks=snakemake.params.ks, coverage=snakemake.params.coverage)


if __name__ == "__main__":
    run_script(main, "convergence_seed_tables", globals())
