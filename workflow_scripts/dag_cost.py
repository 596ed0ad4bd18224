"""Wall time and peak memory of every rule, from the benchmark records (rule dag_cost)."""

import resource
import sys
import time

import pandas as pd
import psutil

from traintime.core.io import to_markdown, write_csv, write_text
from traintime.core.report import benchmark_records, dag_cost_table, setup_record
from traintime.core.workflow import run_script


def main(snakemake):
    records = benchmark_records(snakemake.params.benchmarks)
    # This job cannot read its own benchmark record (written after it ends): measure it in-process.
    started = psutil.Process().create_time()
    own = {"rule": snakemake.rule, "job": snakemake.rule, "wall_s": time.time() - started,
           "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
           "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]),
           "started_at": started, "finished_at": time.time()}
    table = dag_cost_table(pd.concat([records, pd.DataFrame([own])], ignore_index=True))
    write_csv(table, snakemake.output.csv)
    # make run's environment set-up before this DAG (the interpreter running this script is that environment's)
    write_csv(setup_record(sys.prefix, float(table["first_start"].min())), snakemake.output.setup)
    write_text("# Cost of the DAG per rule\n\nFrom Snakemake's `benchmark:` record of every job under "
               f"`{snakemake.params.benchmarks}/` (the last run of each job; `{snakemake.rule}` measures itself "
               "in-process). Wall and CPU time in seconds, peak resident memory in MB.\n\n"
               + to_markdown(table) + "\n", snakemake.output.md)


if __name__ == "__main__":
    run_script(main, "dag_cost", globals())
