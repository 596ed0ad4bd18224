"""Rule slurm_summarise of tests/slurm/Snakefile: a byte-stable summary of the fetched files."""

from pathlib import Path

import pandas as pd

from traintime.core.io import read_csv, write_csv
from traintime.core.workflow import run_script


def main(snakemake):
    rows = []
    for path in sorted(str(p) for p in snakemake.input):
        df = read_csv(path)
        numeric = df.select_dtypes("number")
        row = {"file": Path(path).name, "n_rows": len(df), "n_columns": df.shape[1]}
        row.update({f"mean_{c}": float(numeric[c].mean()) for c in sorted(numeric.columns)[:5]})
        rows.append(row)
    write_csv(pd.DataFrame(rows), snakemake.output[0])


if __name__ == "__main__":
    run_script(main, "slurm_summarise", globals())
