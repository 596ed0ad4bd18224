"""Normalise the retrieved traces into results/data/traces.csv (rule normalise_traces)."""

from pathlib import Path

from traintime.core.io import read_csv, write_csv
from traintime.core.specs import load_specs
from traintime.core.workflow import run_script
from traintime.data.retrieve import verify_retrieved
from traintime.emulation.traces import MANIFEST, normalise_traces


def main(snakemake):
    manifest = MANIFEST.validate(read_csv(snakemake.input.manifest), source=snakemake.input.manifest)
    folder = Path(snakemake.input.traces)
    files = [folder / f"{stem}.csv" for stem in manifest.loc[manifest["present"], "trace_file"]]
    verify_retrieved(files, snakemake.config["data"]["sources"])
    write_csv(normalise_traces(files, load_specs(snakemake.params.gpu_specs)), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "normalise_traces", globals())
