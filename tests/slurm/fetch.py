"""Rule slurm_fetch of tests/slurm/Snakefile: the project's retrieval code, mirror only."""

from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, resolve_mirror, retrieve


def main(snakemake):
    data = snakemake.config["data"]
    source = Source.from_config("chronos", data["sources"]["chronos"])
    mirror = resolve_mirror(data.get("mirror"))
    retrieve(source, snakemake.wildcards.path, snakemake.output[0], mirror, allow_download=False)


if __name__ == "__main__":
    run_script(main, "slurm_fetch", globals())
