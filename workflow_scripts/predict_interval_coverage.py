"""Calibrate the roofline step model and measure interval coverage (rule predict_interval_coverage)."""

from traintime.chronos.roofline_calibration import calibrate_with_local
from traintime.core.gpudb import gpu_database
from traintime.core.io import read_csv, write_json, write_table
from traintime.core.workflow import run_script

NOTE = """
Measured coverage of the split-conformal intervals of `traintime predict` beside the nominal one. Step
time: the roofline compute-time model refitted without each GPU, its residuals against the release's
`compute_time_ms` (DataLoader wait excluded) grouped by GPU; for every GPU the interval is calibrated on
the other GPUs and checked on this one. Epochs: the convergence method's leave-one-model-out predictions,
grouped by model. `finite-sample (guarantee)` uses the conformal correction (with 9 calibration groups at
90 % it takes the largest residual); `empirical quantile` does not. `interval_factor_*`: the interval is
[prediction / factor, prediction x factor].
"""


def main(snakemake):
    p = snakemake.params
    specs = gpu_database(p.gpu_specs)
    local = read_csv(snakemake.input.local, low_memory=False) if "local" in snakemake.input.keys() else None
    cal, table = calibrate_with_local(read_csv(snakemake.input.iteration, low_memory=False), local, specs,
                                      p.train_on, p.coverage, read_csv(snakemake.input.convergence_predictions),
                                      p.method)
    write_json(cal, snakemake.output.calibration)
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="Interval coverage of traintime predict (measured vs nominal)", note=NOTE, floatfmt=".3g")


if __name__ == "__main__":
    run_script(main, "predict_interval_coverage", globals())
