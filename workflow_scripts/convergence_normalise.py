"""Normalise the CHRONOS convergence CSVs into results/data/convergence.csv (rule convergence_normalise)."""

import logging

from traintime.core.workflow import run_script
from traintime.data.chronos_convergence import normalise_convergence, write_convergence
from traintime.data.retrieve import verify_retrieved

log = logging.getLogger("traintime.chronos.convergence")


def main(snakemake):
    paths = {family: snakemake.input[family] for family in ("CNN", "MLP", "Transformer")}
    verify_retrieved(list(paths.values()), snakemake.config["data"]["sources"])
    df = normalise_convergence(paths, source_prefix="chronos/")
    write_convergence(df, snakemake.output[0])
    log.info("convergence: %d runs (%s) -> %s", len(df),
             ", ".join(f"{f} {n}" for f, n in df["family"].value_counts(sort=False).items()), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "convergence_normalise", globals())
