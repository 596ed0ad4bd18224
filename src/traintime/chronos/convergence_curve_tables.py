"""Table of the grouped curve extrapolation (issue 14.2; rule convergence_curves). The early-stopping rule it
replays lives in traintime.measure.train, so the rule runs in the torch environment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from traintime.chronos.convergence_noise import seed_noise_floor
from traintime.chronos.curves_model import (
    curves_table,
    grouped_curve_errors,
    runs_from_tables,
)
from traintime.core.io import read_csv, to_markdown, write_csv, write_text
from traintime.measure.training_rows import CONVERGENCE_STATUSES


def write_curve_tables(runs_csv: str, curves_csv: str, out: Mapping[str, str], ks: Sequence[int]) -> None:
    """Grouped (leave one configuration out) curve-extrapolation MAPE per k and method (csv, md, per-run errors)."""
    runs, curves = read_csv(runs_csv), read_csv(curves_csv)
    items = runs_from_tables(curves, runs) if not runs.empty else []
    errors = grouped_curve_errors(items, ks)
    tab = curves_table(errors)
    write_csv(tab, out["csv"])
    write_csv(errors, out["errors"])
    n_cfg = len({r.run_id for r in items})
    body = (to_markdown(tab) if not tab.empty else
            f"(not evaluated: {n_cfg} converged configuration(s) in the seed study; grouped folds need >= 2, "
            "run the full config's seed study)\n")
    capped = sum(r.epochs >= r.max_epochs for r in items)
    floor = seed_noise_floor(runs[runs["status"].isin(CONVERGENCE_STATUSES)]) if not runs.empty else float("nan")
    body += (f"\nRuns that reached the epoch cap: {capped} of {len(items)} (a configuration capped under every seed is "
             "predicted exactly by any method that predicts the cap). Seed-noise floor of these runs: "
             f"{floor:.1f} % MAPE - predicting each run's stopping epoch by the median of its own configuration's "
             "other seeds; a curve method also sees the run's own first k epochs, so it can go below that floor, "
             "but nothing that knows only the configuration can.\n")
    write_text(
        "# Stopping epoch from the first k epochs, unseen configurations\n\n"
        "Local seed-study runs (config `collect.convergence.seed_study`; small models on `digits`, CPU: they show the "
        "method, not the paper's regime). Outer folds leave one configuration (all its seeds) out. Methods: `exp`, "
        "`power`: a parametric curve fitted to the first k losses with the prior of the training curves, extrapolated, "
        "the run's early-stopping rule replayed; `cross_run`: ridge regression of log10 T_conv on features of the first "
        "k epochs (first loss, relative drops, both parametric extrapolations, patience, epoch cap) trained on the "
        "other configurations' runs; `selected`: one of exp / power / cross_run chosen by leave-one-configuration-out "
        "inner CV on the training configurations only (`chosen`: how often each); `no_curve_median`: the median T_conv "
        "of the training runs. MAPE over runs still training after k epochs, per training seed, then mean / "
        "sd / 95 % t-interval over seeds. Runs stopped by the epoch cap count (the cap is part of the stopping rule). "
        "Target: <= 10 % from k = 3.\n\n" + body, out["md"])
