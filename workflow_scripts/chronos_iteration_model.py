"""Train and save the step-time model on every row of each family (rule chronos_iteration_model):
the released rows plus the merged local rows unless collect.train_on is released_only."""

from traintime.chronos.evaluation import train_iteration_predictor
from traintime.chronos.iteration_tables import load_predictions
from traintime.chronos.selection import fit_nested_predictor_with_cv
from traintime.core.errors import ConfigError
from traintime.core.io import write_json
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration
from traintime.measure.training_rows import combine_rows, extend_specs


def main(snakemake):
    p = snakemake.params
    local = None
    if "local" in snakemake.input.keys():
        from traintime.measure.local import load_local_iteration

        local = load_local_iteration(snakemake.input.local)
    table, summary = combine_rows(load_iteration(snakemake.input.table), local, p.train_on, kind="iteration")
    predictions = load_predictions(list(snakemake.input.predictions))
    clean = {**p.clean, "specs": extend_specs(load_specs(p.gpu_specs), summary["local_gpus"])}
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
    predictor.metadata["training_data"] = summary
    predictor.save(snakemake.output.model)
    write_json(predictor.metadata, snakemake.output.card)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_model", globals())
