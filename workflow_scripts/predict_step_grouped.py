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


def main(snakemake):
    p = snakemake.params
    os.environ["TRAINTIME_CACHE"] = str(Path(p.cache_dir).resolve())  # static features of every traced model
    from traintime.predict_step_grouped import run_step_grouped

    cal = json.loads(Path(snakemake.input.calibration).read_text())
    local = read_csv(snakemake.input.local, low_memory=False) if "local" in snakemake.input.keys() else None
    summary, cov, frozen, md, folds, scaling, chronos_oof, sizes = run_step_grouped(
        read_csv(snakemake.input.traces), read_csv(snakemake.input.iteration, low_memory=False), cal, p.gpu_specs,
        p.img_px, p.precisions, p.batch_sizes, p.coverage, local=local, train_on=p.train_on,
        max_folds=p.max_outer_folds, model_groups=p.lomo_model_groups)
    summary.to_csv(snakemake.output.csv, index=False)
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
    for name, path in [("efficiency", snakemake.output.model), ("neighbour", snakemake.output.neighbour_model)]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(frozen[name], indent=1) + "\n")


if __name__ == "__main__":
    run_script(main, "predict_step_grouped", globals())
