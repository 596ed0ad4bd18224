"""Test predictions of one protocol and seed, every family (rule chronos_iteration_evaluate)."""

import logging

import pandas as pd

from traintime.chronos.evaluation import PREDICTION_COLUMNS, evaluate_family_nested
from traintime.core.io import write_csv
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration

log = logging.getLogger("traintime")


def main(snakemake):
    settings = snakemake.params.settings
    seeds = list(snakemake.params.seeds)
    test_only = snakemake.params.test_only
    clean = {**snakemake.params.clean, "specs": load_specs(snakemake.params.gpu_specs)}
    if test_only["n_estimators_scale"] != 1.0 or test_only["max_rows_per_family"] is not None:
        log.warning("chronos_iteration.test_only is set (%s): results do not reproduce the released settings",
                    test_only)
    table = load_iteration(snakemake.input[0])
    preds, choices = [], []
    for family in snakemake.params.families:
        pred, choice = evaluate_family_nested(
            table, family, snakemake.wildcards.protocol, feature_sets=settings["feature_sets"],
            estimators=settings["estimators"], seeds=seeds, n_jobs=snakemake.threads,
            n_estimators_scale=test_only["n_estimators_scale"], clean_options=clean,
            max_rows=test_only["max_rows_per_family"], selection=snakemake.params.selection)
        preds.append(pred[PREDICTION_COLUMNS])
        choices.append(choice)
    write_csv(pd.concat(preds, ignore_index=True), snakemake.output.predictions)
    write_csv(pd.concat(choices, ignore_index=True), snakemake.output.choices)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_evaluate", globals())
