"""Normalise the released CHRONOS timing CSVs into results/data/iteration.csv (rule chronos_iteration_normalise)."""

from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import FAMILIES, normalise_iteration, write_iteration
from traintime.data.retrieve import verify_retrieved


def main(snakemake):
    verify_retrieved([snakemake.input[f] for f in FAMILIES], snakemake.config["data"]["sources"])
    paths = {family: snakemake.input[family] for family in FAMILIES}
    table = normalise_iteration(paths, specs=load_specs(snakemake.params.gpu_specs))
    write_iteration(table, snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "chronos_iteration_normalise", globals())
