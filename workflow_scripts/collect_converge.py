"""One run to early stopping on the local device: convergence row + curve (rule collect_converge)."""

import pandas as pd

from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.measure.collect import convergence_run, run_convergence_job
from traintime.measure.device_request import resolve_collect


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    specs = getattr(snakemake.params, "gpu_specs", None)  # the config's gpu_specs table
    c = resolve_collect({**snakemake.params.collect, "gpu_specs": specs}, dict(snakemake.resources.items()),
                        job=f"{snakemake.rule} {snakemake.wildcards.run}")
    row, curve = run_convergence_job(convergence_run(c, snakemake.wildcards.run), c)
    write_csv(pd.DataFrame([row]), snakemake.output.row)
    write_csv(curve, snakemake.output.curve)


if __name__ == "__main__":
    run_script(main, "collect_converge", globals())
