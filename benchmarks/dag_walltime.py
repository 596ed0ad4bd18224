"""Benchmark: wall time of the default DAG from scratch on this machine (target <= 10 minutes).

Runs ``snakemake --cores N`` on the embedded default config in a fresh temporary working
directory (so existing results/ are neither used nor touched) and prints the wall time, the
number of jobs and the slowest rules (from Snakemake's per-job logs of this run).

    .venv/bin/python benchmarks/dag_walltime.py --cores 2 [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_START = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_END = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def job_durations(log: str) -> list[tuple[str, float]]:
    """(rule, seconds) for every finished job of a Snakemake console log (1 s resolution)."""
    stamp: datetime | None = None
    rule: str | None = None
    started: dict[str, tuple[str, datetime]] = {}
    out = []
    for line in log.splitlines():
        if m := _STAMP.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := _START.match(line):
            rule = m.group(1)
        elif (m := _JOBID.match(line)) and rule and stamp:
            started[m.group(1)] = (rule, stamp)
            rule = None
        elif (m := _END.match(line)) and m.group(1) in started and stamp:
            name, t0 = started.pop(m.group(1))
            out.append((name, (stamp - t0).total_seconds()))
    return out


def print_slowest(log: str, top: int = 12) -> None:
    per_rule: dict[str, list[float]] = defaultdict(list)
    for name, sec in job_durations(log):
        per_rule[name].append(sec)
    total = sum(sum(v) for v in per_rule.values())
    print(f"job time summed over jobs: {total:.0f} s; slowest rules (jobs, summed s, max s):")
    for name, secs in sorted(per_rule.items(), key=lambda kv: -sum(kv[1]))[:top]:
        print(f"  {name:34s} {len(secs):3d} {sum(secs):7.0f} {max(secs):6.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--keep", type=Path, help="run in this folder and keep its results")
    ap.add_argument("--target-min", type=float, default=10.0)
    args = ap.parse_args()

    work = args.keep or Path(tempfile.mkdtemp(prefix="traintime-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("TRAINTIME_DATA_MIRROR", str((REPO / ".." / "shared" / "data").resolve()))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    cmd = [snakemake, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", str(args.cores),
           "--benchmark-extended"]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    jobs = job_durations(res.stderr + res.stdout)
    print(f"default DAG: exit {res.returncode}, {len(jobs)} jobs finished, wall time {wall:.1f} s "
          f"({wall / 60:.2f} min) on {args.cores} cores; target <= {args.target_min:.0f} min: "
          f"{'met' if wall <= args.target_min * 60 and res.returncode == 0 else 'NOT met'}")
    print_slowest(res.stderr + res.stdout)
    if res.returncode != 0:
        print((res.stderr or res.stdout)[-3000:])
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return res.returncode


if __name__ == "__main__":
    sys.exit(main())
