"""Retrieve one pinned file (rule retrieve_file): mirror first, then URL; sha256 verified."""

from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, resolve_mirror, retrieve


def main(snakemake):
    source = Source.from_config(snakemake.wildcards.source, snakemake.params.source)
    # The mirror is where a file may come from, not what it is: not a param (the sha256 is), so moving
    # the mirror never invalidates a verified file.
    mirror = resolve_mirror(snakemake.config["data"]["mirror"])
    retrieve(source, snakemake.wildcards.path, snakemake.output[0], mirror,
             allow_download=snakemake.params.allow_download)


if __name__ == "__main__":
    run_script(main, "retrieve_file", globals())
