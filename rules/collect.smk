# Local collection on this machine's device (CPU here, CUDA unchanged: config collect.device = auto).
# Benchmark jobs (one file each) -> results/data/local_iteration.csv; probe-batch ablation per
# (model, dataset); short runs to early stopping -> results/data/local_convergence.csv; tables: probe
# cost and ablation, the analytic-FLOP cross-check against the release, predictions for the local rows
# before / after adding them, and the predict example (saved CHRONOS models, probe on this device).
# GPU rules (slurm profile: gpu: 1): collect_bench, collect_probe, collect_converge.
# Configuration: config.yaml `collect` (schemas/config.schema.yaml).

COL = config["collect"]
COL_DIR = f"{RESULTS}/collect"
# Timing rules hold timing=1 (profiles/default caps it at 1: one timing job at a time) and, unless the
# device is the CPU, gpu=1 (a whole GPU on SLURM; a local limit with --resources gpu=N).
COL_GPU = 0 if COL["device"] == "cpu" else 1
COL_BENCH = [
    f"{m}__{d}__{o}__b{b}__p{p}"
    for m in COL["benchmark"]["models"]
    for d in COL["benchmark"]["datasets"]
    for o in COL["benchmark"]["optimizers"]
    for b in COL["benchmark"]["batch_sizes"]
    for p in COL["benchmark"]["precisions"]
]
COL_PROBE = [f"{m}__{d}" for m in COL["benchmark"]["models"] for d in COL["benchmark"]["datasets"]]
COL_CONV = [
    f"{r['model']}__{r['dataset']}__{r['optimizer']}__b{r['batch_size']}__lr{float(r['learning_rate']):g}__p{r.get('precision', 32)}"
    for r in COL["convergence"]["runs"]
]
COL_ITER_MODEL = f"{MODELS}/iteration/iteration_model.joblib"
COL_CONV_MODEL = f"{MODELS}/convergence/{config['chronos_convergence']['final_method']}.joblib"
COL_ITER_PRED = [f"{DATA}/iteration_predictions/{p}.csv" for p in config["chronos_iteration"]["protocols"]]
COL_CONV_PRED = f"{DATA}/convergence_predictions/{config['chronos_convergence']['final_method']}.csv"


rule collect_bench:
    """Time one configuration on the local device (5 warm-up + 20 measured steps) -> one iteration row."""
    input:
        lib=lib("collect_bench"),
    output:
        f"{COL_DIR}/iteration/{{job}}.csv",
    params:
        collect=COL,
        gpu_specs=config["gpu_specs"],
    wildcard_constraints:
        job="|".join(COL_BENCH) if COL_BENCH else "none",
    threads: 1
    resources:
        timing=1,
        gpu=COL_GPU,
    priority: LONGEST_JOB_PATH  # scheduling only: local_iteration.csv gates the chain to predict_step_grouped
    log:
        f"{LOGS}/collect/bench_{{job}}.log",
    benchmark:
        bench(f"{LOGS}/collect/bench_{{job}}.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_bench.py"


rule collect_merge_iteration:
    """Merge the benchmark rows into the local meta-dataset (canonical iteration schema, deduplicated)."""
    input:
        rows=expand(f"{COL_DIR}/iteration/{{job}}.csv", job=COL_BENCH),
        lib=lib("collect_merge"),
    output:
        f"{DATA}/local_iteration.csv",
    priority: LONGEST_JOB_PATH
    log:
        f"{LOGS}/collect/merge_iteration.log",
    benchmark:
        bench(f"{LOGS}/collect/merge_iteration.log")
    localrule: True
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_merge.py"


rule collect_probe:
    """Probe features of one (model, dataset) at each probe batch size, on several mini-batches."""
    input:
        lib=lib("collect_probe"),
    output:
        f"{COL_DIR}/probe/{{target}}.csv",
    params:
        collect=COL,
        gpu_specs=config["gpu_specs"],
    wildcard_constraints:
        target="|".join(COL_PROBE) if COL_PROBE else "none",
    threads: 1
    resources:
        timing=1,
        gpu=COL_GPU,
    priority: EARLY_TIMING
    log:
        f"{LOGS}/collect/probe_{{target}}.log",
    benchmark:
        bench(f"{LOGS}/collect/probe_{{target}}.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_probe.py"


rule collect_converge:
    """One run to validation-based early stopping (80/20 split) with its probe -> one convergence row."""
    input:
        lib=lib("collect_converge"),
    output:
        row=f"{COL_DIR}/convergence/{{run}}.csv",
        curve=f"{COL_DIR}/convergence/{{run}}_curve.csv",
    params:
        collect=COL,
        gpu_specs=config["gpu_specs"],
    wildcard_constraints:
        run="|".join(COL_CONV) if COL_CONV else "none",
    threads: 1
    resources:
        timing=1,
        gpu=COL_GPU,
    priority: EARLY_TIMING
    log:
        f"{LOGS}/collect/converge_{{run}}.log",
    benchmark:
        bench(f"{LOGS}/collect/converge_{{run}}.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_converge.py"


rule collect_merge_convergence:
    """Merge the runs into the local convergence meta-dataset and the long table of their curves."""
    input:
        rows=expand(f"{COL_DIR}/convergence/{{run}}.csv", run=COL_CONV),
        curves=expand(f"{COL_DIR}/convergence/{{run}}_curve.csv", run=COL_CONV),
        lib=lib("collect_merge"),
    output:
        table=f"{DATA}/local_convergence.csv",
        curves=f"{DATA}/local_convergence_curves.csv",
    log:
        f"{LOGS}/collect/merge_convergence.log",
    benchmark:
        bench(f"{LOGS}/collect/merge_convergence.log")
    localrule: True
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_merge.py"


rule collect_table_probe:
    """Probe cost as a share of one epoch, and the probe-batch ablation (spread of the features)."""
    input:
        probes=expand(f"{COL_DIR}/probe/{{target}}.csv", target=COL_PROBE),
        iteration=f"{DATA}/local_iteration.csv",
        lib=lib("collect_tables"),
    output:
        cost=report(f"{TABLES}/probe_cost.csv", caption="../report/collect_probe_cost.rst",
                    category="Local collection"),
        cost_md=f"{TABLES}/probe_cost.md",
        ablation=report(f"{TABLES}/probe_batch_ablation.csv", caption="../report/collect_probe_ablation.rst",
                        category="Local collection"),
        ablation_md=f"{TABLES}/probe_batch_ablation.md",
    log:
        f"{LOGS}/collect/table_probe.log",
    benchmark:
        bench(f"{LOGS}/collect/table_probe.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_tables.py"


rule collect_table_crosscheck:
    """Analytic FLOPs / parameters (meta device) against the released CHRONOS columns."""
    input:
        CNN=raw_path("chronos", "epoch_time_prediction/data/CNN.csv"),
        MLP=raw_path("chronos", "epoch_time_prediction/data/MLP.csv"),
        Transformer=raw_path("chronos", "epoch_time_prediction/data/Transformer.csv"),
        lib=lib("collect_crosscheck"),
    output:
        csv=report(f"{TABLES}/analytic_crosscheck.csv", caption="../report/collect_analytic_crosscheck.rst",
                   category="Local collection"),
        md=f"{TABLES}/analytic_crosscheck.md",
    log:
        f"{LOGS}/collect/table_crosscheck.log",
    benchmark:
        bench(f"{LOGS}/collect/table_crosscheck.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_crosscheck.py"


rule collect_table_before_after:
    """Step-time predictions for the local rows: fitted on released rows only vs refitted with the other
    local rows (leave one local model out)."""
    input:
        local=f"{DATA}/local_iteration.csv",
        released=f"{DATA}/iteration.csv",
        lib=lib("collect_before_after"),
    output:
        csv=report(f"{TABLES}/local_before_after.csv", caption="../report/collect_before_after.rst",
                   category="Local collection"),
        md=f"{TABLES}/local_before_after.md",
    params:
        model=config["chronos_iteration"]["model"],
        selection=config["chronos_iteration"]["selection"],
        clean=config["chronos_iteration"]["clean"],
        test_only=config["chronos_iteration"]["test_only"],
        seed=config["seeds"][0],
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/collect/table_before_after.log",
    benchmark:
        bench(f"{LOGS}/collect/table_before_after.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_before_after.py"


rule collect_table_predict_example:
    """The predict API on one configuration: estimate on one GPU and the ranking of every GPU."""
    input:
        iteration_model=COL_ITER_MODEL,
        convergence_model=COL_CONV_MODEL,
        iteration=f"{DATA}/iteration.csv",
        convergence=f"{DATA}/convergence.csv",
        iteration_predictions=COL_ITER_PRED,
        convergence_predictions=COL_CONV_PRED,
        lib=lib("collect_predict_example"),
    output:
        csv=report(f"{TABLES}/predict_example.csv", caption="../report/collect_predict_example.rst",
                   category="Local collection"),
        md=f"{TABLES}/predict_example.md",
    params:
        collect=COL,
        gpu_specs=config["gpu_specs"],
    threads: 1
    log:
        f"{LOGS}/collect/table_predict_example.log",
    benchmark:
        bench(f"{LOGS}/collect/table_predict_example.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/collect_predict_example.py"


ALL_TARGETS.extend(
    [
        f"{DATA}/local_iteration.csv",
        f"{DATA}/local_convergence.csv",
        f"{TABLES}/probe_cost.csv",
        f"{TABLES}/probe_batch_ablation.csv",
        f"{TABLES}/analytic_crosscheck.csv",
        f"{TABLES}/local_before_after.csv",
        f"{TABLES}/predict_example.csv",
    ]
)
