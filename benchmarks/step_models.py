"""Benchmark: per protocol and data source, the error of the step-time model of ``traintime predict`` and of the
previous model on the same outer folds, and the wall time of one fit (issue 13; :mod:`traintime.chronos.step_benchmark`).

Reads the tables of a finished run (``results/tables/predict_step_grouped.csv``, whose fit times the rule
``predict_step_grouped`` measured, ``predict_step_two_label.csv`` and ``steptime_host_power_law.csv``) and prints
one line per protocol and label.
Rule ``predict_step_benchmark`` writes the same lines to ``results/predict_step_benchmark.txt`` (shown in the README).

    .venv/bin/python benchmarks/step_models.py [--results results]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=str(REPO / "results"), help="results folder of a finished run")
    a = ap.parse_args(argv)
    from traintime.chronos.step_benchmark import benchmark_table, render
    from traintime.core.io import read_csv

    tables = Path(a.results) / "tables"

    def optional(name: str):
        return read_csv(tables / name) if (tables / name).exists() else None

    print(render(benchmark_table(read_csv(tables / "predict_step_grouped.csv"), optional("predict_step_two_label.csv"),
                                 optional("steptime_host_power_law.csv"))), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
