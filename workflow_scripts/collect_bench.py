"""Time one benchmark job on the local device and write its canonical iteration row (rule collect_bench)."""

import pandas as pd

from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.measure.collect import parse_job_id
from traintime.measure.device_request import resolve_collect
from traintime.measure.timing import run_benchmark


def main(snakemake):
    import torch

    torch.set_num_threads(snakemake.threads)
    specs = getattr(snakemake.params, "gpu_specs", None)  # the config's gpu_specs table
    c = resolve_collect({**snakemake.params.collect, "gpu_specs": specs}, dict(snakemake.resources.items()),
                        job=f"{snakemake.rule} {snakemake.wildcards.job}")
    job = parse_job_id(snakemake.wildcards.job, c["benchmark"]["learning_rate"])
    img_px = c["img_px"] if job.dataset.lower() in ("digits", "synthetic") else None
    job = type(job)(job.model, job.dataset, job.optimizer, job.batch_size, job.precision_bits, job.learning_rate,
                    img_px=img_px)
    row = run_benchmark(job, device=c["device"], data_root=c["data_root"], num_workers=c["num_workers"],
                        warmup=c["warmup_iterations"], measured=c["measured_iterations"], seed=c["seed"],
                        expected_gpu=c["expected_gpu"], download=c["download"],
                        gpu_specs=c.get("gpu_specs"))
    write_csv(pd.DataFrame([row]), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "collect_bench", globals())
