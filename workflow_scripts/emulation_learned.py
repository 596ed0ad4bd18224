"""Learned cross-GPU baseline (every seed) and the per-workload power law (deterministic), leave-one-target-GPU-out
(rule emulation_learned)."""

import pandas as pd

from traintime.core.io import write_csv
from traintime.core.specs import canonical_gpu, load_specs
from traintime.core.workflow import run_script
from traintime.emulation.analysis import to_predictions
from traintime.emulation.baselines import leave_one_gpu_out
from traintime.emulation.power_law import power_law_logo
from traintime.emulation.traces import evaluation_slice, load_traces


def main(snakemake):
    cfg, specs = snakemake.params.cfg, load_specs(snakemake.params.gpu_specs)
    rows = evaluation_slice(load_traces(snakemake.input.traces), cfg["precision"], cfg["batch_size"],
                            cfg["include_cleanup"], cfg["exclude_models"])
    host = canonical_gpu(cfg["reference_host"], specs)
    pred = leave_one_gpu_out(rows, rows, host, snakemake.params.seeds, specs, **cfg["learned"])
    law = power_law_logo(rows, rows, host, specs)
    write_csv(pd.concat([to_predictions(pred, "learned"), to_predictions(law, "power_law")], ignore_index=True),
              snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "emulation_learned", globals())
