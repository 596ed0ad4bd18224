"""Predict's memory estimate against the traces' out-of-memory runs, and the usable fraction predict applies
(rule predict_memory_fit)."""

import os
from pathlib import Path

from traintime.core.io import read_csv, write_json, write_table
from traintime.core.workflow import run_script

NOTE = """
Estimate per run (traintime.measure.memory): parameters x (4 weights + 4 gradients + 4 x optimizer states) + the
bytes autograd saves for the backward pass of one sample (meta-device walk, at 32 bits) x batch, halved under 16-bit
autocast. Called out of memory when the estimate exceeds the usable fraction of the card's memory (the trace's
vram_gb). `estimate`: that fraction fitted on the runs of every other memory size, scored on the held-out size
(`usable_fraction`); `pooled`: all held-out runs; `no check`: never calls out of memory. `oom_caught_pct`: share of
the out-of-memory runs called so; `false_alarm_pct`: share of the runs that ran called out of memory. Runs: the
public consumer-GPU traces (60 timm models, 64 / 128 / 224 px, batches 16 / 32 / 64, fp32 / fp16 / bf16, SGD);
`traintime predict` applies the fraction fitted on all of them (results/models/memory/memory_fit.json).
"""


def main(snakemake):
    os.environ["TRAINTIME_CACHE"] = str(Path(snakemake.params.cache_dir).resolve())  # predict's static features
    from traintime.predict_memory import memory_fit_eval

    table, frozen = memory_fit_eval(read_csv(snakemake.input.traces, low_memory=False))
    skipped = frozen["skipped"]
    note = NOTE + (f"\nLeft out (predict cannot build them): {'; '.join(skipped)}.\n" if skipped else "")
    write_table(table, snakemake.output.csv, snakemake.output.md,
                title="Does the run fit the GPU's memory? Predict's estimate against measured out-of-memory runs",
                note=note, floatfmt=".4g")
    write_json(frozen, snakemake.output.model)


if __name__ == "__main__":
    run_script(main, "predict_memory_fit", globals())
