"""Rule slurm_fetch of tests/slurm/Snakefile: the project's retrieval code, mirror only."""

from traintime.data.retrieve import Source, resolve_mirror, retrieve
from traintime.workflow import run_script


def main(snakemake):
    data = snakemake.config["data"]
    source = Source.from_config("chronos", data["sources"]["chronos"])
    mirror = resolve_mirror(data.get("mirror"))
    retrieve(source, snakemake.wildcards.path, snakemake.output[0], mirror, allow_download=False)


if __name__ == "__main__":
    run_script(main, "slurm_fetch", globals())
