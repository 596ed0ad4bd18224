"""Retrieve the optional external benchmark's pinned files that can be had (rule retrieve_external) + a manifest."""

from pathlib import Path

import pandas as pd

from traintime.core.errors import ConfigError
from traintime.core.io import write_csv
from traintime.core.workflow import run_script
from traintime.data.retrieve import Source, resolve_mirror, retrieve_optional


def main(snakemake):
    data = snakemake.config["data"]  # mirror / URL are not params: only checksums rerun the rule
    name = snakemake.params.source
    if name not in data["sources"]:
        raise ConfigError(f"predict_external.source: {name!r} is not in data.sources "
                          f"(known: {', '.join(data['sources'])})")
    source = Source.from_config(name, data["sources"][name])
    Path(snakemake.output.files).mkdir(parents=True, exist_ok=True)
    records = retrieve_optional(source, snakemake.output.files, resolve_mirror(data["mirror"]),
                                allow_download=data["allow_download"])
    write_csv(pd.DataFrame(records, columns=["path", "present", "origin", "reason"]), snakemake.output.manifest)


if __name__ == "__main__":
    run_script(main, "retrieve_external", globals())
