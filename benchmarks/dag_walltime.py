"""Benchmark: wall time of the default DAG from scratch on this machine.

Runs ``snakemake --cores N`` on the embedded default config in a fresh temporary working
directory (so existing results/ are neither used nor touched), prints the wall time and, per rule,
the jobs' wall time and peak memory from the run's own ``results/tables/dag_cost.csv`` (rule
dag_cost, built from every job's ``benchmark:`` record).

    .venv/bin/python benchmarks/dag_walltime.py --cores 2 [--keep DIR] [--target-min 12]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="run in this folder and keep its results")
    ap.add_argument("--target-min", type=float, default=12.0)
    ap.add_argument("--top", type=int, default=12, help="rules to print, slowest first")
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="traintime-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("TRAINTIME_DATA_MIRROR", str((REPO / ".." / "shared" / "data").resolve()))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", str(args.cores)]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    cost_path = work / "results" / "tables" / "dag_cost.csv"
    cost = pd.read_csv(cost_path) if cost_path.is_file() else pd.DataFrame()
    jobs = int(cost["jobs"].sum()) if not cost.empty else 0
    print(f"default DAG: exit {res.returncode}, {jobs} jobs, wall time {wall:.1f} s ({wall / 60:.2f} min) "
          f"on {args.cores} cores; target <= {args.target_min:.0f} min: "
          f"{'met' if wall <= args.target_min * 60 and res.returncode == 0 else 'NOT met'}")
    if not cost.empty:
        print(f"job wall time summed over jobs: {cost['wall_s_total'].sum():.0f} s; slowest rules:")
        print(cost.head(args.top).to_string(index=False))
    if res.returncode != 0:
        print((res.stderr or res.stdout)[-3000:])
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
