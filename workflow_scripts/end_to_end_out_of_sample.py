"""End-to-end time and cost of every configuration, out of sample (rule end_to_end_out_of_sample)."""

import logging

from traintime.chronos.convergence_protocols import PREDICTIONS
from traintime.chronos.end_to_end_oos import end_to_end_pairs, end_to_end_summary
from traintime.chronos.iteration_tables import load_predictions
from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration
from traintime.data.chronos_convergence import load_convergence

log = logging.getLogger("traintime.chronos.end_to_end_oos")


def main(snakemake):
    s = snakemake.params.settings
    stored = None
    if snakemake.input.get("epochs"):  # rule convergence_evaluate's out-of-fold T_conv of the same estimator
        stored = PREDICTIONS.validate(read_csv(snakemake.input.epochs), source=snakemake.input.epochs)
    entry = (s["feature_set"], s["estimator"])
    iteration = load_iteration(snakemake.input.iteration)
    iteration = iteration[iteration["status"] == "ok"]
    pairs = end_to_end_pairs(iteration, load_convergence(snakemake.input.convergence),
                             load_predictions([snakemake.input.predictions]), load_specs(snakemake.params.gpu_specs),
                             snakemake.params.seeds, protocol=s["protocol"], entry=entry,
                             convergence_method=s["convergence_method"], epochs_predictions=stored)
    summary = end_to_end_summary(pairs, s["protocol"], entry, s["convergence_method"])
    write_csv(pairs, snakemake.output.pairs)
    write_table(summary, snakemake.output.csv, snakemake.output.md,
                title=f"End-to-end time and cost out of sample ({s['protocol'].upper()} folds), every configuration",
                note=f"Step time: {s['protocol']} test predictions of {entry[0]} + {entry[1]} (the configuration's "
                     f"{'model' if s['protocol'] == 'lomo' else 'dataset'} held out on every GPU and learning rate); "
                     f"epochs: `{s['convergence_method']}` fitted per seed without the runs of the held-out group (rule "
                     "convergence_evaluate's out-of-fold predictions where it made them for the seed); "
                     "measured: released step time x released T_conv (no wall-clock end-to-end time exists in the "
                     "release). hours = epochs x N/B x step / 3.6e6; cost = hours x price per GPU-hour (the price "
                     "is the same on both sides, so cost MAPE = hours MAPE over priced GPUs). Ranking per "
                     "configuration over the GPUs with a price: Spearman rank correlation, top-1 hit (predicted "
                     "cheapest = measured cheapest) and regret (measured cost of the predicted cheapest / cheapest - "
                     "1, %). `hours_interval_coverage_pct`: share of pairs whose measured hours lie in the 90 % "
                     "interval built as `traintime predict` builds it (split-conformal step and epochs half-widths, "
                     "calibrated on the other held-out groups of the family, or of every family where it has fewer "
                     "than 9, in quadrature); `hours_interval_coverage_own_family_pct`: the same calibrated on the "
                     "family's own groups however few (the rule before). mean, sd (ddof=1) and 95 % Student-t interval "
                     "over seeds.")
    all_rows = summary[summary["family"] == "ALL"].set_index("metric")["mean"]
    log.info("end-to-end out of sample: hours MAPE %.1f %%, cost-rank Spearman %.2f, top-1 hit %.0f %%",
             all_rows["hours_mape_pct"], all_rows["cost_rank_spearman"], all_rows["cost_top1_hit_pct"])


if __name__ == "__main__":
    run_script(main, "end_to_end_out_of_sample", globals())
