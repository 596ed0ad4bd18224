"""Stopping epoch from the first k epochs on unseen configurations (rule convergence_curves)."""

from traintime.chronos.convergence_curve_tables import write_curve_tables
from traintime.core.workflow import run_script


def main(snakemake):
    write_curve_tables(snakemake.input.runs, snakemake.input.curves, dict(snakemake.output.items()),
                       snakemake.params.ks)


if __name__ == "__main__":
    run_script(main, "convergence_curves", globals())
