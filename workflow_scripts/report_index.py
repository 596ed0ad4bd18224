"""Write results/report_index.md listing every product of the run (rule report_index)."""

from pathlib import Path

from traintime.core.io import write_text
from traintime.core.report import report_index_markdown
from traintime.core.workflow import run_script


def main(snakemake):
    out = Path(snakemake.output[0])  # results/report_index.md: the index covers its folder
    write_text(report_index_markdown(out.parent, list(snakemake.input.targets)), out)


if __name__ == "__main__":
    run_script(main, "report_index", globals())
