"""The open issues' numeric targets against this run's tables (rule issue_targets)."""

from pathlib import Path

from traintime.core.io import write_csv, write_text
from traintime.core.targets import targets_markdown, targets_table
from traintime.core.workflow import run_script
from traintime.predict_step_models import auto_step_model


def main(snakemake):
    step_model, _ = auto_step_model(Path(snakemake.input.step_rule).parents[1])  # <models>/steptime/<file>
    table = targets_table(Path(snakemake.input.tables[0]).parent, step_model)
    write_csv(table, snakemake.output.csv)
    write_text(targets_markdown(table), snakemake.output.md)


if __name__ == "__main__":
    run_script(main, "issue_targets", globals())
