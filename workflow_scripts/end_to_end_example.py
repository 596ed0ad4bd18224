"""End-to-end time and cost of the config `example` configuration on every GPU (rule end_to_end_example)."""

import logging

from traintime.chronos.convergence import ConvergencePredictor
from traintime.chronos.cost import RunConfig, end_to_end_example, end_to_end_markdown
from traintime.chronos.estimators import load_iteration_model
from traintime.core.io import write_csv, write_text
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.chronos import load_iteration
from traintime.data.chronos_convergence import load_convergence

log = logging.getLogger("traintime.chronos.cost")


def main(snakemake):
    p = snakemake.params
    config = RunConfig.from_config(p.example)
    seeds = list(p.seeds) if p.example["seeds"] == "all" else list(p.seeds)[:1]
    conv_model = ConvergencePredictor.load(snakemake.input.convergence_model)
    table, info = end_to_end_example(
        config, load_iteration(snakemake.input.iteration), load_iteration_model(snakemake.input.iteration_model),
        load_convergence(snakemake.input.convergence), conv_model, conv_model.metadata["method"],
        load_specs(p.gpu_specs), gpus=p.example["gpus"], seeds=seeds)
    note = f"""
Configuration: {info['config']} ({info['family']}; N = {info['dataset_size']} training samples,
N/B = {info['steps_per_epoch']:g} steps per epoch, no ceil, no validation pass).

**Predictions** (`*_predicted`): models refitted without this configuration, seed(s) {info['seeds']}:
the saved iteration-time model's estimator refitted on {info['iteration_training_rows_held_out']} rows of
its family without this configuration on any GPU or learning rate, and `{info['convergence_method']}`
refitted on {info['convergence_training_runs_held_out']} runs without this run. `*_in_sample`: the saved
models (trained on every row, this configuration included, as the released predictor is).
**Measurements** (`*_measured`): the released step time of this exact configuration on that GPU and the
run's released T_conv (one run, seed 42, GPU not recorded; T_conv does not depend on the GPU).
The "measured" hours and cost are measured step time x N/B x measured T_conv, not a measured wall-clock
time: the release has no end-to-end timing. Epoch s = N/B x step ms / 1000; hours = epochs x epoch s /
3600; cost = hours x on-demand price per GPU-hour from the GPU spec table (2025 list prices).
APEs are |predicted - measured| / measured in %. Cost ranks: 1 = cheapest.
"""
    write_csv(table, snakemake.output.csv)
    write_text(end_to_end_markdown(table, f"End-to-end estimate: {info['config']}", note), snakemake.output.md)
    log.info("end-to-end: %s on %d GPUs; mean hours APE %.1f%% (held out), %.1f%% (in-sample)", info["config"],
             len(table), table["hours_ape_pct"].mean(), table["hours_in_sample_ape_pct"].mean())


if __name__ == "__main__":
    run_script(main, "end_to_end_example", globals())
