"""Train and save the step-time model on every row of each family (rule chronos_iteration_model)."""

from traintime.chronos.evaluation import train_iteration_predictor
from traintime.chronos.iteration_tables import load_predictions
from traintime.chronos.selection import fit_nested_predictor_with_cv
from traintime.core.errors import ConfigError
from traintime.core.io import write_json
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration


def main(snakemake):
    p = snakemake.params
    table = load_iteration(snakemake.input.table)
    predictions = load_predictions(list(snakemake.input.predictions))
    clean = {**p.clean, "specs": load_specs(p.gpu_specs)}
    fs, est = p.model["feature_set"], p.model["estimator"]
    if (fs == "nested") != (est == "nested"):
        raise ConfigError(f"chronos_iteration.model: feature_set {fs!r} with estimator {est!r}; nested needs both nested")
    if fs == "nested":
        predictor = fit_nested_predictor_with_cv(
            table, p.families, protocol=p.model.get("selection_protocol", "logo"), seed=p.seed,
            selection=p.selection, clean_options=clean, n_jobs=snakemake.threads,
            n_estimators_scale=p.test_only["n_estimators_scale"], predictions=predictions)
    else:
        predictor = train_iteration_predictor(
            table, families=p.families, feature_set=fs, estimator=est, seed=p.seed, clean_options=clean,
            n_jobs=snakemake.threads, n_estimators_scale=p.test_only["n_estimators_scale"], predictions=predictions)
    predictor.save(snakemake.output.model)
    write_json(predictor.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_model", globals())
