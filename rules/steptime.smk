# Operator-level roofline step-time model (issue 13): op graphs of every traced and CHRONOS workload
# (meta device, no GPU), then the grouped evaluation of the new model beside the previous one.
#
#   steptime_op_graphs   -> results/data/op_graphs_traces.csv, results/data/op_graphs_chronos.csv
#   steptime_tables      -> results/tables/steptime_traces.{csv,md}, steptime_chronos.{csv,md},
#                           steptime_fit_times.json
# Configuration: config.yaml `steptime` (schemas/config.schema.yaml).

ST = config["steptime"]
STEPTIME_TARGETS = [
    f"{TABLES}/steptime_traces.csv", f"{TABLES}/steptime_traces.md",
    f"{TABLES}/steptime_chronos.csv", f"{TABLES}/steptime_chronos.md",
]


rule steptime_op_graphs:
    """Walk one training step of every (model, input size) on the meta device: FLOPs/bytes per op class."""
    input:
        traces=f"{DATA}/traces.csv",
        iteration=f"{DATA}/iteration.csv",
        lib=lib("steptime_op_graphs"),
    output:
        traces=f"{DATA}/op_graphs_traces.csv",
        chronos=f"{DATA}/op_graphs_chronos.csv",
    params:
        cache_dir=ST["op_graph_cache"],
        include_chronos=ST["chronos"]["enabled"],
    log:
        f"{LOGS}/steptime/op_graphs.log",
    benchmark:
        bench(f"{LOGS}/steptime/op_graphs.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/steptime_op_graphs.py"


rule steptime_tables:
    """Grouped evaluation (LOGO / leave-one-generation-out on traces; LOGO/LOMO/LODO on CHRONOS)."""
    input:
        traces=f"{DATA}/traces.csv",
        iteration=f"{DATA}/iteration.csv",
        op_traces=f"{DATA}/op_graphs_traces.csv",
        op_chronos=f"{DATA}/op_graphs_chronos.csv",
        lib=lib("steptime_tables"),
    output:
        traces_csv=f"{TABLES}/steptime_traces.csv",
        traces_md=f"{TABLES}/steptime_traces.md",
        chronos_csv=f"{TABLES}/steptime_chronos.csv",
        chronos_md=f"{TABLES}/steptime_chronos.md",
        fit_times=f"{TABLES}/steptime_fit_times.json",
    params:
        cfg=ST,
        seeds=config["seeds"],
        gpu_specs=config["gpu_specs"],
    log:
        f"{LOGS}/steptime/tables.log",
    benchmark:
        bench(f"{LOGS}/steptime/tables.log")
    conda:
        env("torch")
    script:
        "../workflow_scripts/steptime_tables.py"


if ST["enabled"]:
    ALL_TARGETS.extend(STEPTIME_TARGETS)
