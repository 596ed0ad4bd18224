"""GPU-style rule of tests/slurm/Snakefile: record the SLURM allocation this job ran in (JSON).

Also records the interpreter and the traintime package the job used, so the test can check that
jobs run in the project's virtual environment.
"""

import os
import socket
import sys

import traintime
from traintime.core.io import write_json
from traintime.core.workflow import run_script

KEYS = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
        "SLURM_CPUS_PER_GPU", "SLURM_MEM_PER_NODE", "CUDA_VISIBLE_DEVICES")


def main(snakemake):
    record = {k: os.environ.get(k) for k in KEYS}
    record["host"] = socket.gethostname()
    record["python"] = sys.executable
    record["traintime"] = traintime.__file__
    write_json(record, snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "slurm_allocation", globals())
