"""Variants of the NTK-guided baseline per model beside the paper's column (rule convergence_ntk_gap)."""

from traintime.chronos.convergence_extra_tables import write_ntk_gap
from traintime.core.workflow import run_script


def main(snakemake):
    write_ntk_gap(snakemake.input[0], dict(snakemake.output.items()), snakemake.params.seeds)


if __name__ == "__main__":
    run_script(main, "convergence_ntk_gap", globals())
