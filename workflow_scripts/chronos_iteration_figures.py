"""Iteration-time figures from the merged test predictions (rule chronos_iteration_figures)."""

from traintime.chronos.iteration_tables import (
    figure_grouped_errors,
    figure_pred_vs_measured,
    figure_seed_spread,
    load_predictions,
    load_reference,
)
from traintime.core.workflow import run_script


def main(snakemake):
    pred = load_predictions(list(snakemake.input.predictions))
    figure_pred_vs_measured(pred, snakemake.output.scatter)
    figure_grouped_errors(pred, snakemake.output.grouped)
    figure_seed_spread(pred, load_reference(), snakemake.output.seeds)


if __name__ == "__main__":
    run_script(main, "chronos_iteration_figures", globals())
