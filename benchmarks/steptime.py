"""Benchmark: errors of the operator-roofline step-time model and of the previous model, per
protocol and data source, and the wall time of one fit (issue 13).

Reads the op graphs and data tables the workflow builds (``results/data/op_graphs_*.csv``,
``results/data/traces.csv``, ``results/data/iteration.csv``; build them with
``snakemake results/data/op_graphs_traces.csv results/data/op_graphs_chronos.csv``) and prints one
line per (data source, protocol, mode / label, method): MAPE and the mean wall time of one fit.

    PYTHONPATH=src .venv/bin/python benchmarks/steptime.py [--seeds 42 0 1] [--no-chronos]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _fit_time_previous(traces, specs, host):  # one fit of the previous trace baseline
    from traintime.emulation.baselines import CrossGPURegressor, learned_features
    from traintime.emulation.steptime_traces import host_rows

    rows = host_rows(traces, host)
    X = learned_features(rows, specs)
    t0 = time.perf_counter()
    CrossGPURegressor(random_state=0).fit(X, rows["latency_ms"])
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO / "results" / "data"))
    ap.add_argument("--seeds", type=int, nargs="+", default=[42, 0, 1])
    ap.add_argument("--host", default="RTX-5090")
    ap.add_argument("--alpha", type=float, default=1e-3)
    ap.add_argument("--no-chronos", action="store_true")
    a = ap.parse_args(argv)

    from traintime.chronos.steptime_report import chronos_tables, trace_tables
    from traintime.core.io import read_csv
    from traintime.core.specs import load_specs
    from traintime.data.chronos import load_iteration
    from traintime.emulation.traces import evaluation_slice, load_traces

    d = Path(a.data)
    specs = load_specs()
    traces = evaluation_slice(load_traces(d / "traces.csv"), None, None)
    t0 = time.perf_counter()
    ttab, tfit = trace_tables(traces, read_csv(d / "op_graphs_traces.csv"), specs, a.host, a.seeds, a.alpha)
    prev_fit = _fit_time_previous(traces, specs, a.host)
    print(f"# traces ({time.perf_counter() - t0:.0f} s); one fit: op_roofline {tfit}, previous_xgb {prev_fit:.2f} s")
    for r in ttab.itertuples(index=False):
        print(f"traces  {r.protocol:6s} {r.mode:7s} {r.slice:9s} {r.method:14s} MAPE {r.mape_mean:6.2f} "
              f"(sd {r.mape_sd:.2f}, {r.n_seeds} seed(s))")
    if not a.no_chronos:
        t0 = time.perf_counter()
        ctab, cfit = chronos_tables(load_iteration(d / "iteration.csv"), read_csv(d / "op_graphs_chronos.csv"),
                                    specs, ["logo", "lomo", "lodo"], a.seeds, a.seeds[:1], a.alpha)
        print(f"# CHRONOS ({time.perf_counter() - t0:.0f} s); one compute fit (s): {cfit}")
        for r in ctab.itertuples(index=False):
            print(f"chronos {r.protocol:6s} {r.label:16s} {r.method:19s} pooled MAPE {r.pooled_mape_mean:7.2f}  "
                  f"group MAPE {r.group_mape_mean:7.2f}  MAE {r.mae_ms:8.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
