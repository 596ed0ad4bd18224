"""Probe-feature ablation under nested CV over seeds (rule convergence_probe_ablation)."""

from traintime.chronos.convergence_extra_tables import write_probe_tables
from traintime.core.workflow import run_script


def main(snakemake):
    write_probe_tables(snakemake.input[0], dict(snakemake.output.items()), snakemake.params.protocols,
                       snakemake.params.seeds, snakemake.params.inner_max_folds)


if __name__ == "__main__":
    run_script(main, "convergence_probe_ablation", globals())
