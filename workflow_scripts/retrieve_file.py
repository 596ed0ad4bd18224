"""Retrieve one pinned file (rule retrieve_file): mirror first, then URL; sha256 verified."""

from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, resolve_mirror, retrieve


def main(snakemake):
    data = snakemake.config["data"]  # not params: only the checksum (params.sha256) reruns the rule
    source = Source.from_config(snakemake.wildcards.source, data["sources"][snakemake.wildcards.source])
    retrieve(source, snakemake.wildcards.path, snakemake.output[0], resolve_mirror(data["mirror"]),
             allow_download=data["allow_download"])


if __name__ == "__main__":
    run_script(main, "retrieve_file", globals())
