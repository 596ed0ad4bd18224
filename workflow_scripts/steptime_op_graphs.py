"""Operator graphs (FLOPs, bytes, operator count per class and phase) of every traced and CHRONOS
workload, walked on the meta device (rule steptime_op_graphs)."""

import logging

from traintime.chronos.steptime_report import build_op_graphs
from traintime.core.workflow import run_script

log = logging.getLogger("traintime")


def main(snakemake):
    p = snakemake.params
    build_op_graphs(snakemake.input.traces, snakemake.input.iteration, snakemake.output.traces,
                    snakemake.output.chronos, p.cache_dir, p.include_chronos)


if __name__ == "__main__":
    run_script(main, "steptime_op_graphs", globals())
