"""Spec mapping, spec-mapped and oracle predictions from host rows, and the feasibility of each
mapping (rule emulation_predict)."""

import pandas as pd

from traintime.core.io import write_csv
from traintime.core.specs import canonical_gpu, load_specs
from traintime.core.workflow import run_script
from traintime.emulation.analysis import (
    empty_predictions,
    read_host_table,
    to_predictions,
)
from traintime.emulation.mapping import (
    host_predictions,
    mapping_status,
    spec_mapping,
    sweep_points,
)
from traintime.emulation.traces import evaluation_slice, load_traces


def main(snakemake):
    cfg, specs = snakemake.params.cfg, load_specs(snakemake.params.gpu_specs)
    traces = load_traces(snakemake.input.traces)
    targets = evaluation_slice(traces, None, None, cfg["include_cleanup"], cfg["exclude_models"])
    host = read_host_table(snakemake.input.rows)
    hosts = sorted(set(host["host_gpu"])) or [canonical_gpu(cfg["reference_host"], specs)]
    gpus = sorted(traces["gpu"].unique())
    mapping = pd.concat([spec_mapping(h, [g for g in gpus if g != h], specs, backend=cfg["mapping_backend"])
                         for h in hosts], ignore_index=True)
    write_csv(mapping, snakemake.output.mapping)
    limits = dict(max_sm_distance=cfg["mapping_max_sm_distance"], max_clock_distance=cfg["mapping_max_clock_distance"])
    pred, orc = host_predictions(host, targets, cfg["mapping_backend"], specs, **limits)
    pts = sweep_points(host, specs) if not host.empty else host
    pts = pts[pts["backend"] == cfg["mapping_backend"]] if not pts.empty else pts
    write_csv(mapping_status(pts, gpus, specs, **limits), snakemake.output.mapping_status)
    frames = [to_predictions(g, m) for m, g in pred.groupby("method")] if not pred.empty else []
    out = pd.concat(frames, ignore_index=True) if frames else empty_predictions()
    write_csv(out, snakemake.output.predictions)
    write_csv(orc, snakemake.output.oracle)


if __name__ == "__main__":
    run_script(main, "emulation_predict", globals())
