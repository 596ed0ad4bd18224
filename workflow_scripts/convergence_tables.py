"""Per-model and summary MAPE tables and the two convergence figures (rule convergence_tables)."""

import pandas as pd

from traintime.chronos.convergence_protocols import PREDICTIONS, sort_predictions
from traintime.chronos.convergence_tables import (
    load_reference,
    per_model_markdown,
    per_model_table,
    plot_per_model_mape,
    plot_predicted_vs_measured,
    summary_markdown,
    summary_table,
)
from traintime.core.io import read_csv, write_csv, write_text
from traintime.core.workflow import run_script

NOTE = """
MAPE (%) of the convergence epoch T_conv, out-of-fold over the 324 released runs, each family file
evaluated separately as in the released code. "Average (9 paper models)" is the mean of the nine
per-model MAPEs (the paper's Average; DistilBERT is in the data but not in the paper's table). Cells
show mean +- sd over seeds; a single number means one seed or one deterministic fit (the LOMO/LODO
partitions do not depend on the seed; seed-free methods are fitted once). Paper columns: published
values (the paper does not state the protocol). Scaling-law and NTK-guided baselines, the no-probe
ablation, the constant and group-median predictors are reconstructions: the release has no code for
them (see traintime.chronos.convergence).

Features of chronos_rf / chronos_xgb (as released: every column but T_conv, T_80close, T_90close; numeric
columns constant in the training rows dropped): dataset, model, optimizer, family (and task for
Transformers) one-hot; num_classes, dataset_size, learning rate, batch size, parameter count and their
log10 copies; depth (MLPs); the three probe columns; for Transformers also min_delta and max_epochs, two
early-stopping settings that differ between DeiT-Tiny, DistilBERT and ViT and so identify the model.
Dropped as constant: precision, patience, seed, the other MLP widths and, for CNN/MLP, min_delta and
max_epochs. `ntk_trace_proxy_log10` is exactly 2 x `gradient_norm_log10` (not an NTK trace).

Issue-14 estimators (traintime.chronos.convergence_pooling), same folds and seeds: `partial_pooling`
(group medians of log T shrunk toward (model, dataset) -> model / dataset -> family; shrinkage chosen
by inner CV on the training rows; the bar every learned model must clear), `pooled_loglinear` (the same
plus within-group slopes on log lr and log batch size), `xgb_monotone` (XGBoost on dataset size and
classes, parameters and depth, optimizer, lr relative to a per-optimizer default, batch size, steps per
epoch, precision and early-stopping settings, monotone where the direction is known; no identifiers,
no probe), `xgb_probe` (the same plus the probe columns: the probe ablation), `pooled_or_xgb`
(`pooled_loglinear` for a (model, dataset) seen in training, `xgb_monotone` otherwise),
`ntk_guided_per_model` (the NTK-guided fit with one intercept per model) and `nested` (one of
chronos_convergence.nested_candidates, chosen inside each outer-training fold by inner folds of the protocol's kind:
by model inside LOMO, by dataset inside LODO, K-fold over runs inside CV; traintime.chronos.convergence_nested).
Every other row is one fixed estimator; the lowest of them on a protocol is a choice made on its test folds,
`nested` is not.
"""


def main(snakemake):
    methods = list(snakemake.params.methods)
    protocols = list(snakemake.params.protocols)
    preds = pd.concat([PREDICTIONS.validate(read_csv(p), source=p) for p in snakemake.input.predictions],
                      ignore_index=True)
    preds = sort_predictions(preds, protocols, methods)
    ref = load_reference()
    per_model = per_model_table(preds, ref, methods, protocols)
    summary = summary_table(preds, ref, methods, protocols)
    out = snakemake.output
    write_csv(per_model, out.per_model_csv)
    write_text("# CHRONOS convergence: per-model MAPE by protocol and method\n\n"
               + per_model_markdown(per_model, summary, ref) + NOTE, out.per_model_md)
    write_csv(summary, out.summary_csv)
    write_text("# CHRONOS convergence: summary by protocol and method\n\n" + summary_markdown(summary)
               + "\n`avg of 9 models`: mean of the per-model MAPEs of the paper's nine models (the paper's "
                 "Average). `pooled`: over all 324 runs (DistilBERT included). `notes re-run`: the shared "
                 "notes' re-run of the released code (not a published value).\n" + NOTE, out.summary_md)
    plot_predicted_vs_measured(preds, snakemake.params.figure_method, protocols, snakemake.params.seed,
                               out.scatter)
    plot_per_model_mape(per_model, methods, out.bars)


if __name__ == "__main__":
    run_script(main, "convergence_tables", globals())
