"""Fit the chosen convergence estimator on every run and save it (rule convergence_model)."""

from traintime.chronos.convergence import ConvergencePredictor
from traintime.core.io import write_json
from traintime.core.workflow import run_script
from traintime.data.chronos_convergence import load_convergence


def main(snakemake):
    rows = load_convergence(snakemake.input[0])
    model = ConvergencePredictor.fit_all(rows, snakemake.params.method, seed=snakemake.params.seed)
    model.save(snakemake.output.model)
    write_json(model.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "convergence_model", globals())
