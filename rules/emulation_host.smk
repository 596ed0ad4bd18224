# Host GPU measurements for the zero-shot emulation paper (config: emulation.host).
#
# Three GPU timing rules, defined only when emulation.host.enabled is true (the default DAG has none),
# because they need the CUDA GPU named in emulation.host.host_gpu and refuse any other device. They
# hold resources gpu=1 and timing=1, so no two run at once on one machine (profiles/default caps
# timing at 1) and SLURM gives each a whole GPU (profiles/slurm):
#
#   emulation_host_sweep   every workload at every (p, f) of p_grid x f_grid
#                          -> results/emulation/host/sweep_<HOST>.csv
#   emulation_host_mapped  every workload at the spec-mapped (p, f) of one target
#                          -> results/emulation/host/mapped_<HOST>_<TARGET>.csv
#   emulation_host_ops     per-op profile (torch.profiler, unrestricted device) of every model x
#                          img size at ops_batch_sizes x ops_precisions, for the Habitat/NeuSight-
#                          style baselines -> results/emulation/host/ops/<HOST>.csv (schema
#                          op_profile; read through emulation.op_profile_glob); joins `rule all`
#                          when profile_ops is true
#
# Rows follow the host_latency schema (traintime.emulation.schema) and are read by the analysis
# from emulation.measurement_dirs. Host GPU: emulation.host.host_gpu (null, the default: this machine's
# GPU, read-only). Backends: emulation.host.backend (auto | none | mps | green_ctx) and clock_backend
# (auto | none | nvml_clock | analytic_clock); auto = green_ctx + analytic_clock (no root); mps and
# nvml_clock need root (refused with one line without it) and are restored on exit and on SIGINT/SIGTERM.
#
# Run on the host (one GPU job at a time), with a config file holding the host's settings, e.g.
#   host.yaml:  emulation: {host: {enabled: true, host_gpu: RTX-5090, backend: mps,
#                                  clock_backend: nvml_clock, f_grid: [1500, 1800, 2100, 2400]}}
#   snakemake --cores 1 --resources gpu=1 --configfile host.yaml
#   snakemake results/emulation/host/sweep_RTX-5090.csv --cores 1 --configfile host.yaml
#   snakemake results/emulation/host/mapped_RTX-5090_RTX-4060.csv --cores 1 --configfile host.yaml
# (nested keys of a --configfile are merged into config.yaml's; name targets before --configfile).
# Without root the defaults (auto) apply: green contexts and the analytic clock (labelled an approximation).

_HOST_CFG = config["emulation"]["host"]
EMULATION_HOST_DIR = f"{RESULTS}/emulation/host"
# Files the host rules write (inputs of the analysis in rules/emulation.smk); empty when disabled.
EMULATION_HOST_OUTPUTS = []
EMULATION_HOST_OP_OUTPUTS = []

if _HOST_CFG["enabled"]:
    # Which targets the host can emulate needs the GPU spec table: the one library import at parse
    # time beyond validation, and only when host emulation is enabled.
    # host_gpu: null takes the host GPU from this machine's device (read-only NVML, else torch;
    # traintime.emulation.host_setup); the backends (auto: green contexts + analytic clock, no root) are
    # resolved by each job on the machine it runs on.
    from traintime.core.specs import load_specs as _load_specs
    from traintime.emulation.host_setup import detect_host_gpu as _detect_host_gpu
    from traintime.emulation.sweep import emulable_targets as _emulable_targets

    _HOST_SPECS = _load_specs(config["gpu_specs"])
    try:
        EMULATION_HOST = _detect_host_gpu(_HOST_CFG["host_gpu"], _HOST_SPECS)
    except TraintimeError as _exc:
        sys.exit(f"error: {_exc}")
    _HOST_CFG = {**_HOST_CFG, "host_gpu": EMULATION_HOST}
    EMULATION_HOST_TARGETS = _emulable_targets(
        EMULATION_HOST,
        _HOST_CFG["targets"] or [Path(f).stem for f in source_files("gpu_profiler")],
        _HOST_SPECS,
    )
    EMULATION_HOST_OUTPUTS = [f"{EMULATION_HOST_DIR}/sweep_{EMULATION_HOST}.csv"] + [
        f"{EMULATION_HOST_DIR}/mapped_{EMULATION_HOST}_{t}.csv" for t in EMULATION_HOST_TARGETS
    ]
    if _HOST_CFG["profile_ops"]:
        EMULATION_HOST_OP_OUTPUTS = [f"{EMULATION_HOST_DIR}/ops/{EMULATION_HOST}.csv"]
    ALL_TARGETS.extend(EMULATION_HOST_OUTPUTS + EMULATION_HOST_OP_OUTPUTS)

    rule emulation_host_sweep:
        """Measure every configured workload at every (p, f) grid point on the host GPU."""
        input:
            lib=lib("emulation_host_sweep"),
        output:
            f"{EMULATION_HOST_DIR}/sweep_{EMULATION_HOST}.csv",
        params:
            host=_HOST_CFG,
            gpu_specs=config["gpu_specs"],
        resources:
            gpu=1,
            timing=1,
        log:
            f"{LOGS}/emulation_host/sweep_{EMULATION_HOST}.log",
        benchmark:
            bench(f"{LOGS}/emulation_host/sweep_{EMULATION_HOST}.log")
        conda:
            env("torch")
        script:
            "../workflow_scripts/emulation_host_sweep.py"


    rule emulation_host_mapped:
        """Measure every configured workload at the zero-shot (p, f) of one target GPU."""
        input:
            lib=lib("emulation_host_mapped"),
        output:
            f"{EMULATION_HOST_DIR}/mapped_{EMULATION_HOST}_{{target}}.csv",
        params:
            host=_HOST_CFG,
            gpu_specs=config["gpu_specs"],
        wildcard_constraints:
            target="|".join(EMULATION_HOST_TARGETS) or "^$",
        resources:
            gpu=1,
            timing=1,
        log:
            f"{LOGS}/emulation_host/mapped_{EMULATION_HOST}_{{target}}.log",
        benchmark:
            bench(f"{LOGS}/emulation_host/mapped_{EMULATION_HOST}_{{target}}.log")
        conda:
            env("torch")
        script:
            "../workflow_scripts/emulation_host_mapped.py"


    rule emulation_host_ops:
        """Per-op profile of every configured model and input size on the unrestricted host GPU."""
        input:
            lib=lib("emulation_host_ops"),
        output:
            f"{EMULATION_HOST_DIR}/ops/{EMULATION_HOST}.csv",
        params:
            host=_HOST_CFG,
            gpu_specs=config["gpu_specs"],
        resources:
            gpu=1,
            timing=1,
        log:
            f"{LOGS}/emulation_host/ops_{EMULATION_HOST}.log",
        benchmark:
            bench(f"{LOGS}/emulation_host/ops_{EMULATION_HOST}.log")
        conda:
            env("torch")
        script:
            "../workflow_scripts/emulation_host_ops.py"
