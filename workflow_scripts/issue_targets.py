"""The numeric targets of issues 13-15 against this run's tables (rule issue_targets)."""

from pathlib import Path

from traintime.core.io import write_csv, write_text
from traintime.core.targets import auto_step_name, targets_markdown, targets_table
from traintime.core.workflow import run_script


def main(snakemake):
    table = targets_table(Path(snakemake.input.tables[0]).parent, auto_step_name(snakemake.input.step_rule),
                          epochs_model=snakemake.params.epochs_model)
    write_csv(table, snakemake.output.csv)
    write_text(targets_markdown(table), snakemake.output.md)


if __name__ == "__main__":
    run_script(main, "issue_targets", globals())
