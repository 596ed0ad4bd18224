"""Numbers in the README come from ``results/``: generated blocks between markers.

The README holds blocks such as::

    <!-- BEGIN results:claims -->
    ... generated markdown ...
    <!-- END results:claims -->

Rule ``readme_blocks`` renders every block from the tables of a run into
``results/readme_blocks.md`` (:func:`render_blocks`); ``make readme`` copies them into the README
(:func:`fill`). A test compares the README's blocks with ``results/readme_blocks.md`` whenever a run's
results are present, so a figure typed by hand, or left from an older run, fails it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.io import to_markdown

BLOCK = re.compile(r"<!-- BEGIN results:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- END results:(?P=name) -->", re.S)


def _table(path: Path, columns: list[str] | None = None, query: str | None = None, digits: str = ".2f") -> str:
    df = pd.read_csv(path)
    if query:
        df = df.query(query)
    if columns:
        missing = [c for c in columns if c not in df.columns]
        if missing:
            raise SchemaError(f"{path}: README block needs column(s) {missing}")
        df = df[columns]
    return to_markdown(df.reset_index(drop=True), floatfmt=digits)


#: issue 12's budget for ``make run`` from a fresh clone on a 2-core machine, set-up included (minutes)
MAKE_RUN_BUDGET_MIN = 12.0


def _dag_cost(path: Path) -> str:
    cost = pd.read_csv(path)
    span = (cost["last_end"].max() - cost["first_start"].min()) / 60.0
    head = (f"{int(cost['jobs'].sum())} jobs; wall time from the first job's start to the last job's end "
            f"{span:.1f} min (the DAG's wall time when run from scratch, Snakemake's start-up and the "
            f"virtual environment's set-up not included); job wall time summed over jobs "
            f"{cost['wall_s_total'].sum():.0f} s; "
            f"largest peak memory {cost['max_rss_mb'].max():.0f} MB (`{cost.loc[cost['max_rss_mb'].idxmax(), 'rule']}`). "
            "Slowest rules:\n\n")
    setup_path = path.parent.parent / "logs" / "report" / "make_run_setup.csv"  # rule dag_cost
    setup = pd.read_csv(setup_path) if setup_path.exists() else pd.DataFrame()
    if len(setup):
        total = (cost["last_end"].max() - setup["started_at"].min()) / 60.0
        verdict = (f"within issue 12's budget of {MAKE_RUN_BUDGET_MIN:g} min" if round(total, 1) <= MAKE_RUN_BUDGET_MIN
                   else f"{total - MAKE_RUN_BUDGET_MIN:.1f} min over issue 12's budget of {MAKE_RUN_BUDGET_MIN:g} min")
        head = (f"`make run` from a fresh clone: {total:.1f} min from the virtual environment's creation to the last "
                f"job's end (set-up {setup['wall_s'].sum() / 60.0:.1f} min, then Snakemake): {verdict}. " + head)
    cols = ["rule", "jobs", "wall_s_total", "wall_s_max", "max_rss_mb", "cpu_s_total"]
    return head + to_markdown(cost[cols].head(6), floatfmt=".1f")


def _step_rule(path: Path) -> str:
    """The verdict of the step-model rule recorded in the neighbour model file, and what ``auto`` uses
    (:mod:`traintime.core.step_rule`)."""
    from traintime.core.step_rule import auto_step, read_verdict, rule_text

    won, protocols = read_verdict(path) or (False, None)  # the caller renders only files that exist
    rule = rule_text(protocols) if protocols else "every grouped protocol"
    return (f"`neighbour` beats `roofline_calibrated` on {rule}: "
            f"{'yes' if won else 'no'}, so `--step-model auto` uses `{auto_step(path)[0]}`.\n")


def _console(path: Path) -> str:
    """A command transcript (``$ command`` then its output) as a fenced ``console`` block."""
    return "```console\n" + path.read_text().rstrip() + "\n```"


#: Block name -> (results file relative to the results folder, renderer).
BLOCKS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "claims": ("tables/claims_counts.csv", lambda p: _table(p)),
    "iteration-grouped": ("tables/iteration_grouped_summary.csv", lambda p: _table(
        p, ["protocol", "feature_set", "estimator", "n_groups", "mean_group_mape_pct_mean", "mean_group_mape_pct_sd",
            "mean_group_mape_pct_ci95_low", "mean_group_mape_pct_ci95_high", "n_seeds",
            "leakfree_reference_mape_pct"], query="family == 'ALL'")),
    "convergence": ("tables/convergence_summary.csv", lambda p: _table(
        p, ["protocol", "method", "n_seeds", "avg_model_mape_mean_pct", "avg_model_mape_sd_pct",
            "avg_model_mape_ci95_lo_pct", "avg_model_mape_ci95_hi_pct", "paper_avg_model_mape_pct"])),
    "convergence-probe": ("tables/convergence_probe_ablation.csv", lambda p: _table(
        p, ["protocol", "variant", "n_seeds", "mape_mean_pct", "mape_sd_pct", "mape_ci95_lo", "mape_ci95_hi",
            "gain_vs_none_pts", "gain_ci95_lo", "gain_ci95_hi", "nested_chose_a_probe_pct"])),
    "convergence-ntk-gap": ("tables/convergence_ntk_gap.csv", lambda p: _table(
        p, ["variant", "n_seeds", "mape_mean_pct", "mape_sd_pct", "paper_ntk_mape_pct"], query="model == 'average'")),
    "convergence-curves": ("tables/convergence_curves.csv", lambda p: _table(
        p, ["k", "method", "n_configurations", "n_runs", "n_seeds", "mape_mean_pct", "mape_sd_pct", "mape_ci95_lo",
            "mape_ci95_hi", "target_pct", "chosen"])),
    "convergence-limits": ("tables/convergence_limits.csv", lambda p: _table(
        p, ["protocol", "quantity", "method", "n_seeds", "avg_model_mape_pct", "sd_pct", "target_pct"],
        query="family == '9 paper models'")),
    "predict-external": ("tables/predict_external_eval.csv", lambda p: _table(
        p, ["precision", "rows", "gpus", "mape_pct", "median_ape_pct", "geo_mean_pred_over_measured",
            "interval_coverage_pct", "pairs", "pairs_right_pct"])),
    "emulation": ("tables/emulation_table1.csv", lambda p: _table(
        p, ["method", "host_gpu", "n_seeds", "n_gpus", "n", "mape", "mape_sd", "spearman", "pearson_log"])),
    "dag-cost": ("tables/dag_cost.csv", _dag_cost),
    "end-to-end-oos": ("tables/end_to_end_out_of_sample.csv", lambda p: _table(
        p, ["metric", "mean", "sd", "ci95_low", "ci95_high", "n_seeds", "n_configurations", "n_pairs"],
        query="family == 'ALL'")),
    "predict-public": ("tables/predict_public_eval.csv", lambda p: _table(
        p, ["method", "rows", "models", "gpus", "mape_pct", "median_ape_pct", "pairs_right_pct",
            "geo_mean_pred_over_measured"], query="slice == 'all'", digits=".1f")),
    "predict-step-grouped": ("tables/predict_step_grouped.csv", lambda p: _table(
        p, ["protocol", "method", "rows", "folds", "gpus", "models", "mape_pct", "median_ape_pct",
            "pairs_right_pct", "geo_mean_pred_over_measured"], digits=".1f")),
    "predict-step-interior-batch": ("tables/predict_step_interior_batch.csv", lambda p: _table(
        p, ["method", "img_px", "batch_sizes", "rows", "gpus", "models", "mape_pct", "median_ape_pct",
            "geo_mean_pred_over_measured"], digits=".1f")),
    "steptime-host": ("tables/steptime_host_power_law.csv", lambda p: _table(
        p, ["protocol", "method", "host_gpu", "rows", "gpus", "folds", "mape_pct", "median_ape_pct", "target_pct",
            "meets_target"], digits=".1f")),
    "predict-step-batch-scaling": ("tables/predict_step_batch_scaling.csv", lambda p: _table(
        p, ["protocol", "method", "batch_scaling", "rows", "share_pct", "mape_pct", "median_ape_pct",
            "geo_mean_pred_over_measured"], query="method in ['neighbour', 'roofline_calibrated']", digits=".1f")),
    "predict-step-two-label": ("tables/predict_step_two_label.csv", lambda p: _table(
        p, ["protocol", "method", "rows", "n_seeds", "compute_mape_pct", "loader_mae_ms", "step_mape_pct_mean",
            "step_mape_pct_sd", "step_mape_pct_ci95_low", "step_mape_pct_ci95_high", "target_step_mape_pct",
            "meets_target"], digits=".1f")),
    "predict-step-two-label-groups": ("tables/predict_step_two_label_groups.csv", lambda p: _table(
        p, ["held_out", "rows", "step_mape_pct", "compute_mape_pct", "step_mape_pct_measured_loader",
            "loader_wait_ms_measured_median", "loader_wait_ms_predicted_median"], query="method == 'neighbour'",
        digits=".1f")),
    "predict-step-rule": ("models/steptime/neighbour_model.json", _step_rule),
    "predict-step-intervals": ("tables/predict_step_grouped_coverage.csv", lambda p: _table(
        p, ["quantity", "variant", "rows", "groups", "nominal_coverage", "measured_coverage",
            "interval_factor_all_groups"], digits=".3f")),
    "predict-epoch-intervals": ("tables/predict_interval_coverage.csv", lambda p: _table(
        p, ["family", "variant", "rows", "groups", "calibrated_on", "nominal_coverage", "measured_coverage",
            "interval_factor_all_groups", "oof_mape_pct"],
        query="quantity.str.startswith('epochs') and variant != 'finite-sample (guarantee)'", digits=".3f")),
    "iteration-noise-floor": ("tables/iteration_noise_floor.csv", lambda p: _table(
        p, ["label", "family", "rows", "groups", "replicates_per_group", "oracle_mape_pct", "loo_replicate_mape_pct",
            "loo_replicate_median_ape_pct"], digits=".1f")),
    "iteration-fit-floor": ("tables/iteration_fit_floor.csv", lambda p: _table(
        p, ["label", "model_class", "parameters", "mape_pct", "median_ape_pct", "mape_pct_CNN", "mape_pct_MLP",
            "mape_pct_Transformer"], digits=".1f")),
    "predict-example": ("predict_cli_example.txt", lambda p: _console(p)),
    "predict-step-benchmark": ("predict_step_benchmark.txt", lambda p: _console(p)),
    "predict-memory": ("tables/predict_memory_fit.csv", lambda p: _table(
        p, ["held_out", "method", "usable_fraction", "gpus", "runs", "oom_runs", "accuracy_pct", "oom_caught_pct",
            "false_alarm_pct"], digits=".4g")),
    "issue-targets": ("tables/issue_targets.md", lambda p: p.read_text()),
}


def render_blocks(results: str | Path, blocks: Mapping[str, tuple[str, Callable[[Path], str]]] = BLOCKS) -> str:
    """Every block, rendered from the tables under ``results``, with its markers (one file)."""
    parts = []
    for name, (rel, render) in blocks.items():
        path = Path(results) / rel
        if not path.is_file():
            raise SchemaError(f"README block {name!r} needs {path}, which does not exist")
        parts.append(f"<!-- BEGIN results:{name} -->\n{render(path).rstrip()}\n<!-- END results:{name} -->\n")
    return "\n".join(parts)


def blocks_of(text: str) -> dict[str, str]:
    """The generated blocks of a text, by name (body without the markers)."""
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def fill(readme: str, rendered: str) -> str:
    """``readme`` with each of its blocks replaced by the block of the same name in ``rendered``; a
    README block with no rendered counterpart is an error (nothing is left stale silently)."""
    new = blocks_of(rendered)
    missing = sorted(set(blocks_of(readme)) - set(new))
    if missing:
        raise SchemaError(f"README blocks without generated content: {missing}")

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        return f"<!-- BEGIN results:{name} -->\n{new[name]}<!-- END results:{name} -->"

    return BLOCK.sub(sub, readme)


def main(argv: list[str] | None = None) -> int:
    """``python -m traintime.core.readme RENDERED README``: fill README's blocks in place."""
    rendered, readme = (argv or sys.argv[1:])[:2]
    path = Path(readme)
    path.write_text(fill(path.read_text(), Path(rendered).read_text()))
    print(f"filled {len(blocks_of(path.read_text()))} block(s) of {path} from {rendered}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
