"""Train and save the step-time model on every row of each family (rule chronos_iteration_model)."""

from traintime.chronos.evaluation import train_iteration_predictor
from traintime.chronos.iteration_tables import load_predictions
from traintime.core.io import write_json
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration


def main(snakemake):
    p = snakemake.params
    predictor = train_iteration_predictor(
        load_iteration(snakemake.input.table), families=p.families, feature_set=p.model["feature_set"],
        estimator=p.model["estimator"], seed=p.seed, clean_options={**p.clean, "specs": load_specs(p.gpu_specs)},
        n_jobs=snakemake.threads, n_estimators_scale=p.test_only["n_estimators_scale"],
        predictions=load_predictions(list(snakemake.input.predictions)))
    predictor.save(snakemake.output.model)
    write_json(predictor.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_model", globals())
