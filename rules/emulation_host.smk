# Host GPU measurements for the zero-shot emulation paper (config: emulation.host).
#
# Two GPU rules, both off the default DAG (emulation.host.enabled: false), because they need the
# CUDA GPU named in emulation.host.host_gpu and refuse any other device:
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
# from emulation.measurement_dirs. Backends: emulation.host.backend (none | mps | green_ctx) and
# clock_backend (none | nvml_clock | analytic_clock); nvml_clock needs root, mps needs
# nvidia-cuda-mps-control; both are restored on exit and on SIGINT/SIGTERM.
#
# Run on the host (one GPU job at a time), with a config file holding the host's settings, e.g.
#   host.yaml:  emulation: {host: {enabled: true, host_gpu: RTX-5090, backend: mps,
#                                  clock_backend: nvml_clock, f_grid: [1500, 1800, 2100, 2400]}}
#   snakemake --cores 1 --resources gpu=1 --configfile host.yaml
#   snakemake results/emulation/host/sweep_RTX-5090.csv --cores 1 --configfile host.yaml
#   snakemake results/emulation/host/mapped_RTX-5090_RTX-4060.csv --cores 1 --configfile host.yaml
# (nested keys of a --configfile are merged into config.yaml's; name targets before --configfile).
# Without root, use clock_backend: analytic_clock (labelled an approximation) or none.

from traintime.emulation.sweep import emulable_targets as _emulable_targets
from traintime.core.specs import canonical_gpu as _canonical_gpu, load_specs as _load_specs

_HOST_CFG = config["emulation"]["host"]
_HOST_SPECS = _load_specs(config["gpu_specs"])
EMULATION_HOST = _canonical_gpu(_HOST_CFG["host_gpu"], _HOST_SPECS)
EMULATION_HOST_TARGETS = _emulable_targets(
    EMULATION_HOST,
    _HOST_CFG["targets"] or [Path(f).stem for f in source_files("gpu_profiler")],
    _HOST_SPECS,
)
EMULATION_HOST_DIR = f"{RESULTS}/emulation/host"


rule emulation_host_sweep:
    """Measure every configured workload at every (p, f) grid point on the host GPU."""
    output:
        f"{EMULATION_HOST_DIR}/sweep_{EMULATION_HOST}.csv",
    params:
        host=_HOST_CFG,
        gpu_specs=config["gpu_specs"],
    resources:
        gpu=1,
    log:
        f"{LOGS}/emulation_host/sweep_{EMULATION_HOST}.log",
    conda:
        env("emulation")
    script:
        "../workflow_scripts/emulation_host_sweep.py"


rule emulation_host_mapped:
    """Measure every configured workload at the zero-shot (p, f) of one target GPU."""
    output:
        f"{EMULATION_HOST_DIR}/mapped_{EMULATION_HOST}_{{target}}.csv",
    params:
        host=_HOST_CFG,
        gpu_specs=config["gpu_specs"],
    wildcard_constraints:
        target="|".join(EMULATION_HOST_TARGETS) or "^$",
    resources:
        gpu=1,
    log:
        f"{LOGS}/emulation_host/mapped_{EMULATION_HOST}_{{target}}.log",
    conda:
        env("emulation")
    script:
        "../workflow_scripts/emulation_host_mapped.py"


rule emulation_host_ops:
    """Per-op profile of every configured model and input size on the unrestricted host GPU."""
    output:
        f"{EMULATION_HOST_DIR}/ops/{EMULATION_HOST}.csv",
    params:
        host=_HOST_CFG,
        gpu_specs=config["gpu_specs"],
    resources:
        gpu=1,
    log:
        f"{LOGS}/emulation_host/ops_{EMULATION_HOST}.log",
    conda:
        env("emulation")
    script:
        "../workflow_scripts/emulation_host_ops.py"


if _HOST_CFG["enabled"]:
    ALL_TARGETS.extend(
        [f"{EMULATION_HOST_DIR}/sweep_{EMULATION_HOST}.csv"]
        + [f"{EMULATION_HOST_DIR}/mapped_{EMULATION_HOST}_{t}.csv" for t in EMULATION_HOST_TARGETS]
    )
    if _HOST_CFG["profile_ops"]:
        ALL_TARGETS.append(f"{EMULATION_HOST_DIR}/ops/{EMULATION_HOST}.csv")
