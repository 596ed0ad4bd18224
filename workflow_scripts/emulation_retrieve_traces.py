"""Retrieve every pinned consumer-GPU trace that can be had (rule retrieve_traces) + a manifest."""

from pathlib import Path

from traintime.data.retrieve import Source
from traintime.emulation.traces import retrieve_traces
from traintime.io import write_csv
from traintime.specs import load_specs
from traintime.workflow import run_script


def main(snakemake):
    p = snakemake.params
    source = Source.from_config("gpu_profiler", p.source)
    manifest = retrieve_traces(source, snakemake.output.traces, Path(p.mirror) if p.mirror else None,
                               allow_download=p.allow_download, specs=load_specs(p.gpu_specs))
    write_csv(manifest, snakemake.output.manifest)


if __name__ == "__main__":
    run_script(main, "retrieve_traces", globals())
