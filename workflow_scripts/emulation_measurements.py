"""Merge host latency rows from the measurement folders (rule emulation_measurements)."""

from traintime.core.io import write_csv, write_json
from traintime.core.workflow import run_script
from traintime.emulation.analysis import (
    file_digests,
    host_latency_files,
    load_host_rows,
)


def main(snakemake):
    files = host_latency_files(snakemake.input.measurements)
    excluded = []
    rows = load_host_rows(files, excluded=excluded)
    write_csv(rows, snakemake.output.rows)
    bad = [r for df in excluded for r in df[["source_file", "check", "check_reason"]].to_dict("records")]
    write_json({"folders": list(snakemake.params.dirs), "files": file_digests(files),
                "rows": int(len(rows)), "hosts": sorted(rows["host_gpu"].unique().tolist()),
                "excluded_rows": len(bad), "excluded": bad},
               snakemake.output.sources)


if __name__ == "__main__":
    run_script(main, "emulation_measurements", globals())
