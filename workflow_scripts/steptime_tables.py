"""Operator-roofline step-time model vs the previous model: traces and CHRONOS tables (rule steptime_tables)."""

import logging

from traintime.chronos.steptime_report import steptime_job
from traintime.core.workflow import run_script

log = logging.getLogger("traintime")


def main(snakemake):
    steptime_job(dict(snakemake.input), dict(snakemake.output), snakemake.params.cfg, snakemake.params.seeds,
                 snakemake.params.gpu_specs)


if __name__ == "__main__":
    run_script(main, "steptime_tables", globals())
