"""Habitat- and NeuSight-style baselines over per-op host profiles (rule emulation_analytic)."""

import logging

import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.io import read_csv, write_csv, write_text
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.emulation.analysis import (
    NO_OPS,
    empty_predictions,
    read_host_table,
    to_predictions,
)
from traintime.emulation.baselines import OP_PROFILE, analytic_predictions
from traintime.emulation.traces import evaluation_slice, load_traces

log = logging.getLogger("traintime")


def main(snakemake):
    cfg, p = snakemake.params.cfg, snakemake.params
    files = list(snakemake.input.ops)
    if not files:
        log.info("%s", NO_OPS)
        write_csv(empty_predictions(), snakemake.output.predictions)
        write_text(f"Habitat/NeuSight-style baselines skipped: {NO_OPS}.\n", snakemake.output.status)
        return
    specs = load_specs(p.gpu_specs)
    ops = pd.concat([OP_PROFILE.validate(read_csv(f), source=f) for f in files], ignore_index=True)
    if ops["synthetic"].any():
        raise SchemaError("op profiles contain synthetic rows (synthetic=True); measurements only")
    targets = evaluation_slice(load_traces(snakemake.input.traces), None, None, cfg["include_cleanup"],
                               cfg["exclude_models"])
    host = read_host_table(snakemake.input.rows)
    step = host[(host["backend"] == "none") & (host["status"] == "ok")] if not host.empty else None
    pred = analytic_predictions(ops, targets, step, specs)
    frames = [to_predictions(g, m) for m, g in pred.groupby("method")] if not pred.empty else [empty_predictions()]
    write_csv(pd.concat(frames, ignore_index=True), snakemake.output.predictions)
    write_text(f"Habitat/NeuSight-style baselines from {len(files)} op-profile file(s), "
               f"{ops.groupby(['host_gpu', 'model', 'img_px', 'batch_size', 'precision']).ngroups} workloads.\n",
               snakemake.output.status)


if __name__ == "__main__":
    run_script(main, "emulation_analytic", globals())
