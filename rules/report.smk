# Report stage: the HTML report's description (snakemake --report report.zip), an index of every
# table, figure, model and data file (results/report_index.md) and the cost of the DAG per rule
# (results/tables/dag_cost.csv, from every job's benchmark: record). Included last: it indexes
# ALL_TARGETS.

report: "../report/workflow.rst"


REPORT_INPUTS = list(ALL_TARGETS)


rule report_index:
    """List every final product (and the other tables/figures/models) in one markdown file."""
    input:
        targets=REPORT_INPUTS,
        lib=lib("report_index"),
    output:
        f"{RESULTS}/report_index.md",
    log:
        f"{LOGS}/report/report_index.log",
    benchmark:
        bench(f"{LOGS}/report/report_index.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/report_index.py"


TARGET_TABLES = ("predict_step_two_label", "steptime_host_power_law", "predict_step_grouped", "convergence_vs_pooling",
                 "convergence_curves", "convergence_interval_coverage", "predict_external_eval",
                 "predict_step_grouped_coverage", "predict_interval_coverage")


rule issue_targets:
    """The numeric targets of issues 13-15 at a glance: reached value, interval, previous model, status (one rule)."""
    input:
        tables=[f"{TABLES}/{t}.csv" for t in TARGET_TABLES],
        step_rule=f"{RESULTS}/models/steptime/neighbour_model.json",
        lib=lib("issue_targets"),
    output:
        csv=report(f"{TABLES}/issue_targets.csv", caption="../report/issue_targets.rst", category="Pipeline"),
        md=f"{TABLES}/issue_targets.md",
    params:
        epochs_model=config["chronos_convergence"]["final_method"],
    log:
        f"{LOGS}/report/issue_targets.log",
    benchmark:
        bench(f"{LOGS}/report/issue_targets.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/issue_targets.py"


rule dag_cost:
    """Wall time and peak memory per rule from the benchmark records of every job (runs last)."""
    input:
        targets=REPORT_INPUTS + [f"{RESULTS}/report_index.md", f"{TABLES}/issue_targets.csv"],
        lib=lib("dag_cost"),
    output:
        csv=report(f"{TABLES}/dag_cost.csv", caption="../report/dag_cost.rst", category="Pipeline"),
        md=f"{TABLES}/dag_cost.md",
        # make run's venv set-up just before this DAG (empty when none): a record of the machine, not a table
        setup=f"{LOGS}/report/make_run_setup.csv",
    params:
        benchmarks=BENCHMARKS,
    log:
        f"{LOGS}/report/dag_cost.log",
    benchmark:
        bench(f"{LOGS}/report/dag_cost.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/dag_cost.py"


ALL_TARGETS.extend([f"{RESULTS}/report_index.md", f"{TABLES}/issue_targets.csv", f"{TABLES}/dag_cost.csv"])


rule readme_blocks:
    """The README's generated blocks (numbers of this run); `make readme` copies them into README.md."""
    input:
        tables=[f"{TABLES}/{t}.csv" for t in
                ("claims_counts", "iteration_grouped_summary", "convergence_summary", "emulation_table1", "dag_cost",
                  "convergence_probe_ablation", "convergence_ntk_gap", "convergence_curves",
                  "predict_public_eval", "predict_step_grouped", "end_to_end_out_of_sample",
                  "steptime_host_power_law", "predict_interval_coverage", "iteration_noise_floor",
                  "iteration_fit_floor",
                  "convergence_limits", "predict_external_eval", "predict_step_batch_scaling",
                  "predict_step_two_label", "predict_step_two_label_groups", "predict_step_interior_batch",
                  "issue_targets")],
        predict_example=f"{RESULTS}/predict_cli_example.txt",
        step_benchmark=f"{RESULTS}/predict_step_benchmark.txt",
        step_rule=f"{RESULTS}/models/steptime/neighbour_model.json",
        step_intervals=f"{TABLES}/predict_step_grouped_coverage.csv",
        lib=lib("readme_blocks"),
    output:
        f"{RESULTS}/readme_blocks.md",
    log:
        f"{LOGS}/report/readme_blocks.log",
    benchmark:
        bench(f"{LOGS}/report/readme_blocks.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/readme_blocks.py"


ALL_TARGETS.append(f"{RESULTS}/readme_blocks.md")
