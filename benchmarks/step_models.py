"""Benchmark: per protocol and data source, the error of the step-time model of ``traintime predict`` and of the
previous model on the same outer folds, and the wall time of one fit (issue 13; :mod:`traintime.chronos.step_benchmark`).

Reads the tables of a finished run (``results/tables/predict_step_grouped.csv``, ``predict_step_two_label.csv`` and
``steptime_host_power_law.csv``) and the fit times the rules ``predict_step_grouped`` and ``emulation_power_law``
measured (``results/logs/predict/step_grouped_fit_times.csv``, ``results/logs/emulation/
power_law_fit_times.csv``), and prints one line per protocol and label.
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
    from traintime.chronos.step_benchmark import benchmark_from_files, render

    res = Path(a.results)
    tables = res / "tables"
    two_label, host = tables / "predict_step_two_label.csv", tables / "steptime_host_power_law.csv"
    print(render(benchmark_from_files(tables / "predict_step_grouped.csv", res / "logs/predict/step_grouped_fit_times.csv",
                                      two_label if two_label.exists() else None, host if host.exists() else None,
                                      res / "logs/emulation/power_law_fit_times.csv")), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
