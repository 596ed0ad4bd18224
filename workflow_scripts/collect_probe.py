"""Probe-batch ablation of one (model, dataset) on the local device (rule collect_probe)."""

from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.measure.collect import run_probe_job
from traintime.measure.device_request import resolve_collect


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    model, dataset = snakemake.wildcards.target.split("__")
    specs = getattr(snakemake.params, "gpu_specs", None)  # the config's gpu_specs table
    c = resolve_collect({**snakemake.params.collect, "gpu_specs": specs}, dict(snakemake.resources.items()),
                        job=f"{snakemake.rule} {snakemake.wildcards.target}")
    write_csv(run_probe_job(model, dataset, c), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "collect_probe", globals())
