"""`traintime predict` against Lambda's public ResNet-50 training throughput (rule predict_external_eval)."""

import logging

import pandas as pd

from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.workflow import run_script
from traintime.data.retrieve import verify_retrieved
from traintime.predict_cli_example import run_cli
from traintime.predict_external import (
    FILES,
    GPU_NAMES,
    ROW_COLUMNS,
    absent_summary,
    load_benchmark,
    predict_rows,
    summarise,
)

log = logging.getLogger("traintime")

NOTE = """
Lambda's public PyTorch training benchmark (github.com/lambdal/deeplearning-benchmark, pinned commit): NVIDIA
DeepLearningExamples ResNet-50 v1.5 on ImageNet (224 px), single GPU, each GPU at its own batch size; measured
step time = 1000 x batch / (images per second). Predicted: the `traintime predict` command below, on this
run's saved models (`--step-model auto`, compute time). None of these rows was used in training or selection.
Caveats: the benchmark's fp32 uses TF32 tensor cores for convolutions on Ampere and newer (PyTorch's default),
predicted with `--precision tf32` (a physics rule written after seeing these fp32 errors with `--precision 32`:
not an independent test of it); its fp16 is mixed precision; its times include a real data pipeline
(predict shows compute time); most batches lie above the step models' training range (16-256). Pairs: GPU
pairs of one precision ordered right by throughput. Interval: predict's 90 % step interval. called_fit_pct:
share of the runs predict called to fit the card's memory (every benchmark run ran, so 100 is right). Targets (issue 15):
MAPE <= 25 %, >= 90 % of pairs right. See traintime.predict_external.
"""


def main(snakemake):
    manifest = read_csv(snakemake.input.manifest)
    absent = manifest.loc[~manifest["present"].astype(bool), "path"].tolist()
    title = "`traintime predict` against public data-center GPU training throughput (Lambda, ResNet-50)"
    rows_out = snakemake.output.rows
    if absent:
        reason = "; ".join(str(r) for r in manifest.loc[~manifest["present"].astype(bool), "reason"])
        log.warning("external benchmark not evaluated: %d file(s) absent", len(absent))
        write_csv(pd.DataFrame(columns=ROW_COLUMNS), rows_out)
        write_table(absent_summary(reason), snakemake.output.csv, snakemake.output.md, title=title,
                    note=NOTE + f"\nNot evaluated in this run: the pinned files could not be had ({reason}).\n")
        return
    root = snakemake.input.files
    files = {p: (f"{root}/{tp}", f"{root}/{bs}") for p, (tp, bs) in FILES.items()}
    verify_retrieved([f for pair in files.values() for f in pair], snakemake.config["data"]["sources"])
    measured, skipped = load_benchmark(files, snakemake.params.gpu_names or GPU_NAMES)
    extra = ["--models-dir", snakemake.params.models_dir, "--data-dir", snakemake.params.data_dir]
    if snakemake.params.gpu_specs:
        extra += ["--specs", snakemake.params.gpu_specs]
    rows, commands = predict_rows(measured, lambda args: run_cli([*args, *extra]))
    write_csv(rows, rows_out)
    lines = ["", "Commands (plus --models-dir / --data-dir of this run):", ""] + [f"    {c}" for c in commands]
    by_reason: dict[str, list[str]] = {}
    for line in skipped:  # "<precision> <GPU>: <reason>"
        head, reason = line.rsplit(": ", 1)
        by_reason.setdefault(reason, []).append(head)
    lines += [f"\nSkipped ({reason}): {', '.join(heads)}." for reason, heads in by_reason.items()]
    write_table(summarise(rows), snakemake.output.csv, snakemake.output.md, title=title,
                note=NOTE + "\n".join(lines) + "\n")


if __name__ == "__main__":
    run_script(main, "predict_external_eval", globals())
