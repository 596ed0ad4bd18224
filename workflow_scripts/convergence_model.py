"""Fit the chosen convergence estimator on every run and save it (rule convergence_model)."""

from traintime.convergence import ConvergencePredictor
from traintime.data.chronos_convergence import load_convergence
from traintime.io import write_json
from traintime.workflow import run_script


def main(snakemake):
    rows = load_convergence(snakemake.input[0])
    model = ConvergencePredictor.fit_all(rows, snakemake.params.method, seed=snakemake.params.seed)
    model.save(snakemake.output.model)
    write_json(model.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "convergence_model", globals())
