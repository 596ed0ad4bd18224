"""FLOPS-scaling baseline over every precision and batch size (rule emulation_flops)."""

from traintime.core.io import write_csv
from traintime.core.specs import canonical_gpu, load_specs
from traintime.core.workflow import run_script
from traintime.emulation.analysis import to_predictions
from traintime.emulation.baselines import flops_predictions
from traintime.emulation.traces import evaluation_slice, load_traces


def main(snakemake):
    cfg, specs = snakemake.params.cfg, load_specs(snakemake.params.gpu_specs)
    rows = evaluation_slice(load_traces(snakemake.input.traces), None, None, cfg["include_cleanup"],
                            cfg["exclude_models"])
    host = canonical_gpu(cfg["reference_host"], specs)
    write_csv(to_predictions(flops_predictions(rows, rows, host, specs), "flops"), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "emulation_flops", globals())
