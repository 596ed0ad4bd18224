"""Render the README's generated blocks from this run's tables (rule readme_blocks)."""

from pathlib import Path

from traintime.core.io import write_text
from traintime.core.readme import render_blocks
from traintime.core.workflow import run_script


def main(snakemake):
    out = Path(snakemake.output[0])  # results/readme_blocks.md: the tables are below its folder
    write_text(render_blocks(out.parent), out)


if __name__ == "__main__":
    run_script(main, "readme_blocks", globals())
