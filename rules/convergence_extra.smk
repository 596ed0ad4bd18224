# Convergence, issue 14: seed noise of T_conv (local runs of a few configurations under several training
# seeds), learning-curve extrapolation of the stopping epoch from the first k epochs, and the coverage of
# epoch intervals on the released data's grouped folds. Needs rules/collect.smk and
# rules/chronos_convergence.smk (COL_DIR, CONV, DATA, TABLES) included before this file.
# Configuration: collect.convergence.seed_study (the interval coverage is fixed at the target, 90 %).

CX_SEED_RUNS = [
    f"{r['model']}__{r['dataset']}__{str(r['optimizer']).lower()}__b{int(r['batch_size'])}__lr{float(r['learning_rate']):g}__p{int(r.get('precision', 32))}__s{int(s)}"
    for r in COL["convergence"].get("seed_study", {}).get("runs", [])
    for s in COL["convergence"].get("seed_study", {}).get("seeds", [])
]


rule convergence_seed_run:
    """One (configuration, training seed) of the seed study to early stopping -> row + validation curve."""
    input:
        lib=lib("convergence_seed_run"),
    output:
        row=f"{COL_DIR}/convergence_seeds/{{seedrun}}.csv",
        curve=f"{COL_DIR}/convergence_seeds/{{seedrun}}_curve.csv",
    params:
        collect=COL,
    wildcard_constraints:
        seedrun="|".join(CX_SEED_RUNS) if CX_SEED_RUNS else "none",
    threads: 1
    log:
        f"{LOGS}/convergence/seed_run_{{seedrun}}.log",
    benchmark:
        bench(f"{LOGS}/convergence/seed_run_{{seedrun}}.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/convergence_seed_run.py"


rule convergence_seed_tables:
    """Seed spread per configuration; stopping-epoch MAPE from the first k epochs; interval coverage."""
    input:
        rows=expand(f"{COL_DIR}/convergence_seeds/{{seedrun}}.csv", seedrun=CX_SEED_RUNS),
        curves=expand(f"{COL_DIR}/convergence_seeds/{{seedrun}}_curve.csv", seedrun=CX_SEED_RUNS),
        predictions=expand(f"{DATA}/convergence_predictions/{{method}}.csv", method=CONV["methods"]),
        lib=lib("convergence_seed_tables"),
    output:
        runs=f"{DATA}/local_convergence_seed_runs.csv",
        curves=f"{DATA}/local_convergence_seed_curves.csv",
        spread_csv=report(f"{TABLES}/convergence_seed_spread.csv", caption="../report/convergence_seed_spread.rst",
                          category="CHRONOS convergence"),
        spread_md=f"{TABLES}/convergence_seed_spread.md",
        curve_csv=report(f"{TABLES}/convergence_curve_extrapolation.csv", caption="../report/convergence_curve_extrapolation.rst",
                         category="CHRONOS convergence"),
        curve_md=f"{TABLES}/convergence_curve_extrapolation.md",
        coverage_csv=report(f"{TABLES}/convergence_interval_coverage.csv", caption="../report/convergence_interval_coverage.rst",
                            category="CHRONOS convergence"),
        coverage_md=f"{TABLES}/convergence_interval_coverage.md",
        versus_csv=report(f"{TABLES}/convergence_vs_pooling.csv", caption="../report/convergence_vs_pooling.rst",
                          category="CHRONOS convergence"),
        versus_md=f"{TABLES}/convergence_vs_pooling.md",
    params:
        ks=[1, 2, 3, 5],
        coverage=0.9,
    log:
        f"{LOGS}/convergence/seed_tables.log",
    benchmark:
        bench(f"{LOGS}/convergence/seed_tables.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/convergence_seed_tables.py"


ALL_TARGETS.extend(
    [
        f"{TABLES}/convergence_seed_spread.csv",
        f"{TABLES}/convergence_curve_extrapolation.csv",
        f"{TABLES}/convergence_interval_coverage.csv",
        f"{TABLES}/convergence_vs_pooling.csv",
    ]
)


# Issue 14.2 / 14.3: probe ablation under nested CV, the NTK-guided gap, grouped curve extrapolation.
CX_PROBE = CONV.get("probe_ablation", {})


rule convergence_probe_ablation:
    """Does any probe feature help? XGBoost with / without each probe set and a nested choice, over seeds."""
    input:
        f"{DATA}/convergence.csv",
        lib=lib("convergence_probe_ablation"),
    output:
        csv=report(f"{TABLES}/convergence_probe_ablation.csv", caption="../report/convergence_probe_ablation.rst",
                   category="CHRONOS convergence"),
        md=f"{TABLES}/convergence_probe_ablation.md",
        choices=report(f"{TABLES}/convergence_probe_ablation_choices.csv", caption="../report/convergence_probe_ablation_choices.rst",
                       category="CHRONOS convergence"),
    params:
        protocols=CX_PROBE.get("protocols", ["cv", "lomo"]),
        seeds=config["seeds"],
        inner_max_folds=CX_PROBE.get("inner_max_folds", 3),
    log:
        f"{LOGS}/convergence/probe_ablation.log",
    benchmark:
        bench(f"{LOGS}/convergence/probe_ablation.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_probe_ablation.py"


rule convergence_ntk_gap:
    """The NTK-guided baseline's formula and variants per model beside the paper's 27 %."""
    input:
        f"{DATA}/convergence.csv",
        lib=lib("convergence_ntk_gap"),
    output:
        csv=report(f"{TABLES}/convergence_ntk_gap.csv", caption="../report/convergence_ntk_gap.rst",
                   category="CHRONOS convergence"),
        md=f"{TABLES}/convergence_ntk_gap.md",
    params:
        seeds=config["seeds"],
    log:
        f"{LOGS}/convergence/ntk_gap.log",
    benchmark:
        bench(f"{LOGS}/convergence/ntk_gap.log")
    conda:
        env("analysis")
    script:
        "../workflow_scripts/convergence_ntk_gap.py"


rule convergence_curves:
    """Stopping-epoch MAPE from the first k epochs on held-out configurations (parametric, cross-run, selected)."""
    input:
        runs=f"{DATA}/local_convergence_seed_runs.csv",
        curves=f"{DATA}/local_convergence_seed_curves.csv",
        lib=lib("convergence_curves"),
    output:
        csv=report(f"{TABLES}/convergence_curves.csv", caption="../report/convergence_curves.rst",
                   category="CHRONOS convergence"),
        md=f"{TABLES}/convergence_curves.md",
        errors=report(f"{TABLES}/convergence_curves_runs.csv", caption="../report/convergence_curves_runs.rst",
                      category="CHRONOS convergence"),
    params:
        ks=[1, 2, 3, 5],
    log:
        f"{LOGS}/convergence/curves.log",
    benchmark:
        bench(f"{LOGS}/convergence/curves.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/convergence_curves.py"


ALL_TARGETS.extend(
    [
        f"{TABLES}/convergence_probe_ablation.csv",
        f"{TABLES}/convergence_ntk_gap.csv",
        f"{TABLES}/convergence_curves.csv",
    ]
)
