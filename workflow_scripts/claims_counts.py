"""Claims per verdict of the CHRONOS and zero-shot claims tables (rule claims_counts)."""

from traintime.core.verdict import write_verdict_counts
from traintime.core.workflow import run_script


def main(snakemake):
    i = snakemake.input
    write_verdict_counts({"CHRONOS": i.chronos, "zero-shot": i.zero_shot}, snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "claims_counts", globals())
