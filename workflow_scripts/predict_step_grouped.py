"""Step-time models of `traintime predict` on grouped outer folds of the traces and CHRONOS, and the frozen
efficiency and neighbour models (rule predict_step_grouped)."""

import json
import os
from pathlib import Path

from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.workflow import run_script

FOLDS_NOTE = """
Out-of-fold compute-time errors of every method of results/tables/predict_step_grouped.md, per held-out GPU
(`fold`) and family, on the two leave-one-GPU-out protocols. `geo_mean_pred_over_measured` > 1: the GPU is
predicted slower than measured. Label noise for comparison: results/tables/iteration_noise_floor.md.
"""
SCALING_NOTE = """
Out-of-fold compute-time errors on the two leave-one-GPU-out protocols by how the measured time of the row's network
on its own GPU grows with batch (exponent s of time in batch between its smallest and largest measured batch;
traintime.chronos.batch_scaling): s near 0 = the step takes the same time at every batch, a fixed per-step cost of
the host that no GPU spec describes. A diagnostic read from the held-out GPU's own measurements, not a model feature.
"""

SIZES_NOTE = """
Out-of-fold compute-time errors of results/tables/predict_step_grouped.md on the trace protocols, per input size of
the scored rows (the step models are fitted on the traces at every size of predict_public_eval.step_img_px and on
CHRONOS). `traces LOSO` holds out one input size (and the CHRONOS rows of that size): a network at a size never
measured. `traces largest batch` at a small size leaves one measured batch to extrapolate from.
"""

INTERIOR_NOTE = """
The step models of `traintime predict` (fitted on every row: the traces at the batches of
predict_public_eval.batch_sizes, 16 and 64 by default, and CHRONOS) on the trace rows at the batches in between (32),
which no step model was fitted on: a network and GPU the model measured, at a batch it did not. `neighbour` draws the
straight line between the model's times at the two measured batches around the asked one (a fixed cost per step plus
a cost per sample, as beyond the largest measured batch: traintime.chronos.neighbour_batch.affine_between_batches);
`neighbour, no line between measured batches (before)` is the same model without that line (the asked batch is then
a workload never measured: the neighbours' residuals, no per-workload slopes). The line was added after one
`traintime predict` query (ViT-B/16, 224 px, fp16, batch 32 on an RTX 4090: 51 ms predicted between 24 and 84 ms at
16 and 64; 38 ms measured); this table is its check on every traced network, GPU and size.
"""


def main(snakemake):
    p = snakemake.params
    os.environ["TRAINTIME_CACHE"] = str(Path(p.cache_dir).resolve())  # static features of every traced model
    from traintime.chronos.step_benchmark import split_fit_times
    from traintime.predict_step_grouped import run_step_grouped

    cal = json.loads(Path(snakemake.input.calibration).read_text())
    local = read_csv(snakemake.input.local, low_memory=False) if "local" in snakemake.input.keys() else None
    summary, cov, frozen, md, folds, scaling, chronos_oof, sizes, interior = run_step_grouped(
        read_csv(snakemake.input.traces), read_csv(snakemake.input.iteration, low_memory=False), cal, p.gpu_specs,
        p.img_px, p.precisions, p.batch_sizes, p.coverage, local=local, train_on=p.train_on,
        max_folds=p.max_outer_folds, model_groups=p.lomo_model_groups)
    table, fit_times = split_fit_times(summary)  # wall times apart: the table is the same on every run
    table.to_csv(snakemake.output.csv, index=False)
    write_csv(fit_times, snakemake.output.fit_times)
    write_csv(chronos_oof, snakemake.output.chronos_predictions)
    cov.to_csv(snakemake.output.coverage_csv, index=False)
    Path(snakemake.output.md).write_text(md)
    write_table(folds, snakemake.output.folds_csv, snakemake.output.folds_md,
                title="Step-time models per held-out GPU and family (leave-one-GPU-out outer folds)", note=FOLDS_NOTE)
    write_table(scaling, snakemake.output.scaling_csv, snakemake.output.scaling_md,
                title="Step-time errors by how the measured time grows with batch (leave-one-GPU-out outer folds)",
                note=SCALING_NOTE)
    write_table(sizes, snakemake.output.sizes_csv, snakemake.output.sizes_md,
                title="Step-time errors of the trace protocols per input size", note=SIZES_NOTE)
    write_table(interior, snakemake.output.interior_csv, snakemake.output.interior_md,
                title="Step models at a batch between two measured batches of a network (trace rows never fitted on)",
                note=INTERIOR_NOTE)
    for name, path in [("efficiency", snakemake.output.model), ("neighbour", snakemake.output.neighbour_model)]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(frozen[name], indent=1) + "\n")


if __name__ == "__main__":
    run_script(main, "predict_step_grouped", globals())
