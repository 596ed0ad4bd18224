# Zero-shot latency prediction by host emulation: data and analysis (runs without a GPU).
#
#   retrieve_traces          every pinned gpu_profiler trace that can be had -> raw folder + manifest
#   normalise_traces         -> results/data/traces.csv (schema target_trace)
#   emulation_measurements   host rows found in emulation.measurement_dirs -> one validated table
#   emulation_predict        spec mapping (p, f), spec-mapped and oracle predictions from host rows
#   emulation_flops          FLOPS-scaling baseline (reference host trace as the unrestricted host)
#   emulation_learned        learned cross-GPU baseline (xgboost, leave-one-target-GPU-out, all seeds)
#   emulation_analytic       Habitat/NeuSight-style baselines over per-op host profiles (if any)
#   emulation_table1..5, emulation_figure2..7, emulation_claims
#
# Host measurements enter the DAG as inputs: every CSV already in the folders of
# config emulation.measurement_dirs (the analysis keeps those whose header is a host latency table)
# plus, when the host rules are enabled (rules/emulation_host.smk), the files those rules will
# write, so the analysis runs after the sweeps of the same invocation. Adding or changing a
# measurement file reruns the analysis (input functions in rules/common.smk). The default (CPU) DAG
# defines no GPU rule.

EMU = f"{RESULTS}/emulation"
# mapping_backend: auto -> the SM backend of the host rows (traintime.emulation.host_setup).
_EMU_MAP = config["emulation"]["mapping_backend"]
if _EMU_MAP == "auto":
    _EMU_MAP = "mps" if config["emulation"]["host"]["backend"] == "mps" else "green_ctx"
EMU_CFG = {**config["emulation"], "mapping_backend": _EMU_MAP}


EMU_PREDICTIONS = [
    f"{EMU}/predictions_emulation.csv",
    f"{EMU}/predictions_flops.csv",
    f"{EMU}/predictions_learned.csv",
    f"{EMU}/predictions_analytic.csv",
]
EMU_TABLES = ["table1", "table2", "table3", "table4", "table5"]
EMU_FIGURES = ["figure2", "figure3", "figure4", "figure5", "figure6", "figure7"]


rule retrieve_traces:
    """Retrieve every pinned trace file (mirror or URL, sha256-checked); absent files are skipped."""
    input:
        lib=lib("emulation_retrieve_traces"),
    output:
        traces=directory(f"{RAW}/gpu_profiler/gpu_traces"),
        manifest=f"{DATA}/traces_manifest.csv",
    params:
        sha256=config["data"]["sources"]["gpu_profiler"]["files"],  # mirror / URL: read by the script
        gpu_specs=config["gpu_specs"],
    priority: LONGEST_JOB_PATH  # scheduling only: traces.csv gates predict_public_eval -> predict_step_grouped
    log:
        f"{LOGS}/emulation/retrieve_traces.log",
    benchmark:
        bench(f"{LOGS}/emulation/retrieve_traces.log")
    localrule: True
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_retrieve_traces.py"


rule normalise_traces:
    """Normalise the retrieved traces (canonical GPU names, model family, cleanup flag kept)."""
    input:
        traces=f"{RAW}/gpu_profiler/gpu_traces",
        manifest=f"{DATA}/traces_manifest.csv",
        lib=lib("emulation_normalise_traces"),
    output:
        f"{DATA}/traces.csv",
    params:
        gpu_specs=config["gpu_specs"],
    priority: LONGEST_JOB_PATH
    log:
        f"{LOGS}/emulation/normalise_traces.log",
    benchmark:
        bench(f"{LOGS}/emulation/normalise_traces.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_normalise_traces.py"


rule emulation_measurements:
    """Merge and validate the host latency rows present in the measurement folders."""
    input:
        measurements=emulation_measurement_inputs,
        lib=lib("emulation_measurements"),
    output:
        rows=f"{EMU}/measurements.csv",
        sources=f"{EMU}/measurements_sources.json",
    params:
        dirs=EMU_CFG["measurement_dirs"],
    log:
        f"{LOGS}/emulation/measurements.log",
    benchmark:
        bench(f"{LOGS}/emulation/measurements.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_measurements.py"


rule emulation_predict:
    """Zero-shot (p, f) mapping per host and target; spec-mapped and oracle predictions."""
    input:
        traces=f"{DATA}/traces.csv",
        rows=f"{EMU}/measurements.csv",
        lib=lib("emulation_predict"),
    output:
        mapping=f"{EMU}/spec_mapping.csv",
        predictions=f"{EMU}/predictions_emulation.csv",
        oracle=f"{EMU}/oracle.csv",
        mapping_status=f"{EMU}/mapping_status.csv",
    params:
        cfg=EMU_CFG,
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/predict.log",
    benchmark:
        bench(f"{LOGS}/emulation/predict.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_predict.py"


rule emulation_flops:
    """FLOPS-scaling baseline for every precision and batch size of the traces."""
    input:
        traces=f"{DATA}/traces.csv",
        lib=lib("emulation_flops"),
    output:
        f"{EMU}/predictions_flops.csv",
    params:
        cfg=EMU_CFG,
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/flops.log",
    benchmark:
        bench(f"{LOGS}/emulation/flops.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_flops.py"


rule emulation_learned:
    """Learned cross-GPU baseline (every seed) and the per-workload power law on the main slice,
    leave-one-target-GPU-out."""
    input:
        traces=f"{DATA}/traces.csv",
        lib=lib("emulation_learned"),
    output:
        f"{EMU}/predictions_learned.csv",
    params:
        cfg=EMU_CFG,
        seeds=config["seeds"],
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/learned.log",
    benchmark:
        bench(f"{LOGS}/emulation/learned.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_learned.py"


rule emulation_analytic:
    """Habitat- and NeuSight-style predictions over per-op host profiles (skipped when none)."""
    input:
        traces=f"{DATA}/traces.csv",
        rows=f"{EMU}/measurements.csv",
        ops=emulation_op_inputs,
        lib=lib("emulation_analytic"),
    output:
        predictions=f"{EMU}/predictions_analytic.csv",
        status=f"{EMU}/analytic_status.md",
    params:
        cfg=EMU_CFG,
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/analytic.log",
    benchmark:
        bench(f"{LOGS}/emulation/analytic.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_analytic.py"


rule emulation_table1:
    """Table 1: method comparison (MAPE, median APE, SD, Spearman, Pearson of logs); infeasible mappings counted."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        mapping_status=f"{EMU}/mapping_status.csv",
        lib=lib("emulation_tables"),
    output:
        csv=f"{TABLES}/emulation_table1.csv",
        md=report(f"{TABLES}/emulation_table1.md", caption="../report/emulation_table1.rst",
                  category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        table="table1",
    log:
        f"{LOGS}/emulation/table1.log",
    benchmark:
        bench(f"{LOGS}/emulation/table1.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_tables.py"


rule emulation_table2:
    """Table 2: best and worst targets and models; per-target MAPE bars."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        lib=lib("emulation_tables"),
    output:
        csv=f"{TABLES}/emulation_table2.csv",
        md=report(f"{TABLES}/emulation_table2.md", caption="../report/emulation_table2.rst",
                  category="Zero-shot emulation"),
        per_target=report(f"{TABLES}/emulation_per_target.csv", caption="../report/emulation_per_target_table.rst",
                          category="Zero-shot emulation"),
        figure=report(f"{FIGURES}/emulation_per_target.png", caption="../report/emulation_per_target.rst",
                      category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        table="table2",
    log:
        f"{LOGS}/emulation/table2.log",
    benchmark:
        bench(f"{LOGS}/emulation/table2.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_tables.py"


rule emulation_table3:
    """Table 3: per-workload device-ranking Spearman (mean, median, P10, P90)."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        lib=lib("emulation_tables"),
    output:
        csv=f"{TABLES}/emulation_table3.csv",
        md=report(f"{TABLES}/emulation_table3.md", caption="../report/emulation_table3.rst",
                  category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        table="table3",
    log:
        f"{LOGS}/emulation/table3.log",
    benchmark:
        bench(f"{LOGS}/emulation/table3.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_tables.py"


rule emulation_table4:
    """Table 4: agreement between two hosts (needs emulation measurements from two hosts)."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        lib=lib("emulation_tables"),
    output:
        csv=f"{TABLES}/emulation_table4.csv",
        md=report(f"{TABLES}/emulation_table4.md", caption="../report/emulation_table4.rst",
                  category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        table="table4",
    log:
        f"{LOGS}/emulation/table4.log",
    benchmark:
        bench(f"{LOGS}/emulation/table4.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_tables.py"


rule emulation_table5:
    """Table 5: MAPE by model family."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        lib=lib("emulation_tables"),
    output:
        csv=f"{TABLES}/emulation_table5.csv",
        md=report(f"{TABLES}/emulation_table5.md", caption="../report/emulation_table5.rst",
                  category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        table="table5",
    log:
        f"{LOGS}/emulation/table5.log",
    benchmark:
        bench(f"{LOGS}/emulation/table5.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_tables.py"


rule emulation_figure2:
    """Figure 2: latency vs SM count on real targets (traces) and on the restricted host (sweep)."""
    input:
        traces=f"{DATA}/traces.csv",
        rows=f"{EMU}/measurements.csv",
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure2.png", caption="../report/emulation_figure2.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure2",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure2.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure2.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_figure3:
    """Figure 3: |log ratio| landscapes over the host's (clock, SM share) sweep."""
    input:
        traces=f"{DATA}/traces.csv",
        rows=f"{EMU}/measurements.csv",
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure3.png", caption="../report/emulation_figure3.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure3",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure3.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure3.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_figure4:
    """Figure 4: measured vs predicted batch latency for a few models and targets."""
    input:
        predictions=EMU_PREDICTIONS,
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure4.png", caption="../report/emulation_figure4.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure4",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure4.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure4.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_figure5:
    """Figure 5: share of predictions within 5/10/20/50% APE."""
    input:
        predictions=EMU_PREDICTIONS,
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure5.png", caption="../report/emulation_figure5.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure5",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure5.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure5.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_figure6:
    """Figure 6: bias by target generation and input size."""
    input:
        predictions=EMU_PREDICTIONS,
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure6.png", caption="../report/emulation_figure6.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure6",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure6.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure6.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_figure7:
    """Figure 7: MAPE by precision x batch size x input size."""
    input:
        predictions=EMU_PREDICTIONS,
        lib=lib("emulation_figures"),
    output:
        report(f"{FIGURES}/emulation_figure7.png", caption="../report/emulation_figure7.rst",
               category="Zero-shot emulation"),
    params:
        cfg=EMU_CFG,
        figure="figure7",
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/figure7.log",
    benchmark:
        bench(f"{LOGS}/emulation/figure7.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_figures.py"


rule emulation_claims:
    """Claims of the zero-shot paper vs. this reproduction."""
    input:
        predictions=EMU_PREDICTIONS,
        manifest=f"{DATA}/traces_manifest.csv",
        traces=f"{DATA}/traces.csv",
        table1=f"{TABLES}/emulation_table1.csv",
        table2=f"{TABLES}/emulation_table2.csv",
        table3=f"{TABLES}/emulation_table3.csv",
        table4=f"{TABLES}/emulation_table4.csv",
        table5=f"{TABLES}/emulation_table5.csv",
        lib=lib("emulation_claims"),
    output:
        csv=f"{RESULTS}/claims_zero_shot.csv",
        md=report(f"{RESULTS}/claims_zero_shot.md", caption="../report/emulation_claims.rst",
                  category="Claims"),
    params:
        cfg=EMU_CFG,
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/claims.log",
    benchmark:
        bench(f"{LOGS}/emulation/claims.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_claims.py"


ALL_TARGETS.extend(
    [f"{DATA}/traces.csv", f"{EMU}/spec_mapping.csv", f"{RESULTS}/claims_zero_shot.md"]
    + [f"{TABLES}/emulation_{t}.md" for t in EMU_TABLES]
    + [f"{FIGURES}/emulation_{f}.png" for f in EMU_FIGURES]
    + [f"{FIGURES}/emulation_per_target.png"]
)


rule emulation_power_law:
    """With-host step-time protocols of the consumer-GPU traces (issue 13): the per-workload power law in FLOPs /
    bandwidth / SM ratios to the reference host, beside FLOPS scaling and the learned XGBoost baseline, leaving
    one GPU (main slice; all settings) or one RTX generation out."""
    input:
        traces=f"{DATA}/traces.csv",
        learned=f"{EMU}/predictions_learned.csv",
        lib=lib("emulation_power_law"),
    output:
        csv=report(f"{TABLES}/steptime_host_power_law.csv", caption="../report/steptime_host_power_law.rst",
                   category="Zero-shot emulation"),
        md=f"{TABLES}/steptime_host_power_law.md",
        fit_times=f"{LOGS}/emulation/power_law_fit_times.csv",  # wall times of the fits: a record of the machine
    params:
        cfg=EMU_CFG,
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/emulation/power_law.log",
    benchmark:
        bench(f"{LOGS}/emulation/power_law.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/emulation_power_law.py"


ALL_TARGETS.extend(rules.emulation_power_law.output)
