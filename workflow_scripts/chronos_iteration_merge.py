"""Concatenate the per-family test predictions of one protocol (rule chronos_iteration_merge)."""

from traintime.chronos.iteration_tables import load_predictions
from traintime.core.io import write_csv
from traintime.core.workflow import run_script


def main(snakemake):
    pred = load_predictions(list(snakemake.input.parts))
    pred = pred.sort_values(["family", "feature_set", "estimator", "seed", "fold", "row_id"], kind="mergesort")
    write_csv(pred, snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "chronos_iteration_merge", globals())
