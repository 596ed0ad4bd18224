"""Retrieve every pinned consumer-GPU trace that can be had (rule retrieve_traces) + a manifest."""

from traintime.core.io import write_csv
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, resolve_mirror
from traintime.emulation.traces import retrieve_traces


def main(snakemake):
    p = snakemake.params
    data = snakemake.config["data"]  # mirror / URL are not params: only checksums rerun the rule
    source = Source.from_config("gpu_profiler", data["sources"]["gpu_profiler"])
    manifest = retrieve_traces(source, snakemake.output.traces, resolve_mirror(data["mirror"]),
                               allow_download=data["allow_download"], specs=load_specs(p.gpu_specs))
    write_csv(manifest, snakemake.output.manifest)


if __name__ == "__main__":
    run_script(main, "retrieve_traces", globals())
