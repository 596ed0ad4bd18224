"""Fit the chosen convergence estimator on every run and save it (rule convergence_model): the released
runs plus the merged local runs unless collect.train_on is released_only."""

from traintime.chronos.convergence import ConvergencePredictor
from traintime.core.io import write_json
from traintime.core.workflow import run_script
from traintime.data.chronos_convergence import load_convergence
from traintime.measure.training_rows import combine_rows


def main(snakemake):
    local = load_convergence(snakemake.input.local) if "local" in snakemake.input.keys() else None
    rows, summary = combine_rows(load_convergence(snakemake.input.table), local, snakemake.params.train_on,
                                 kind="convergence")
    p = snakemake.params
    model = ConvergencePredictor.fit_all(rows, p.method, seed=p.seed, protocol=p.protocol, candidates=p.candidates)
    model.metadata["training_data"] = summary
    model.save(snakemake.output.model)
    write_json(model.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "convergence_model", globals())
