"""Retrieve one pinned file (rule retrieve_file): mirror first, then URL; sha256 verified."""

from pathlib import Path

from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, retrieve


def main(snakemake):
    source = Source.from_config(snakemake.wildcards.source, snakemake.params.source)
    mirror = Path(snakemake.params.mirror) if snakemake.params.mirror else None
    retrieve(source, snakemake.wildcards.path, snakemake.output[0], mirror,
             allow_download=snakemake.params.allow_download)


if __name__ == "__main__":
    run_script(main, "retrieve_file", globals())
