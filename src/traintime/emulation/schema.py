"""Table schemas of the emulation stage (one place; checked on load, documented from here).

``HOST_LATENCY``
    One row per host measurement: the host GPU, the workload (model, input size, batch, precision)
    and the restriction applied (backend, requested and read-back SMs / clock). Written by the host
    sweep (``results/emulation/host/*.csv``, ``results/reference/*.csv``) and read by the analysis.

``TARGET_TRACE``
    One row per (target GPU, workload) of the normalised consumer-GPU traces
    (``results/data/traces.csv``): the ground truth the host predicts.

Both use the same workload key (``model``, ``img_px``, ``batch_size``, ``precision``) so a join is
a plain merge on those columns.
"""

from __future__ import annotations

from traintime.core.schema import Column, TableSchema

#: Numeric precisions of the workload (autocast dtype; fp32 = no autocast).
PRECISIONS: tuple[str, ...] = ("fp32", "fp16", "bf16")
#: Restriction backends of a host measurement.
#: ``none``: unrestricted host; ``mps``: CUDA MPS active-thread percentage; ``nvml_clock``: locked
#: graphics clock only; ``green_ctx``: green-context SM partition; ``analytic_clock``: latency
#: rescaled by f_host / f_target afterwards (an approximation, not the paper's method).
#: A row that combines an SM restriction with a locked clock uses the SM backend's name and fills
#: ``requested_clock_mhz``.
BACKENDS: tuple[str, ...] = ("none", "mps", "nvml_clock", "green_ctx", "analytic_clock")
STATUSES: tuple[str, ...] = ("ok", "oom", "error")
#: Restriction check of a host row (traintime.emulation.trust): only passed / not_needed rows are analysed.
CHECKS: tuple[str, ...] = ("passed", "failed", "skipped", "not_needed")
#: Workload key shared by host rows and target traces.
WORKLOAD_KEY: tuple[str, ...] = ("model", "img_px", "batch_size", "precision")

HOST_LATENCY = TableSchema(
    name="host_latency",
    description=(
        "One training-step latency measured on a (possibly restricted) host GPU. "
        "`latency_ms` is the minimum CUDA-graph replay time divided by the steps per replay."),
    key=("host_gpu", "model", "img_px", "batch_size", "precision", "backend",
         "requested_sm_pct", "requested_clock_mhz"),
    columns=(
        Column("host_gpu", "str", "canonical host GPU name (traintime.core.specs.canonical_gpu)"),
        Column("model", "str", "timm model name"),
        Column("img_px", "int", "input height = width, pixels", min=1),
        Column("batch_size", "int", "samples per step", min=1),
        Column("precision", "str", "autocast precision", allowed=PRECISIONS),
        Column("backend", "str", "restriction mechanism", allowed=BACKENDS),
        Column("requested_sm_pct", "float",
               "requested share of the host's SMs, percent (MPS thread percentage, or green-context "
               "SMs / host SMs x 100); 100 when unrestricted", min=0, max=100),
        Column("requested_clock_mhz", "float", "requested locked graphics clock, MHz; empty = not locked",
               min=1, nullable=True),
        Column("effective_sms", "int", "SMs read back in the measuring process", min=1, nullable=True),
        Column("effective_clock_mhz", "float", "graphics clock read back during the run, MHz", min=1,
               nullable=True),
        Column("latency_ms", "float", "training-step latency, ms; empty when oom or error", min=0,
               nullable=True, target=True, required_when=("status", "ok")),
        Column("oom", "bool", "the workload ran out of device memory"),
        Column("iters_per_replay", "int", "training steps captured in one CUDA-graph replay", min=1,
               nullable=True),
        Column("replays", "int", "timed replays (latency = minimum)", min=0, nullable=True),
        Column("torch_version", "str", "torch.__version__ of the measuring process", nullable=True),
        Column("device_name", "str", "torch.cuda.get_device_name() as reported", nullable=True),
        Column("status", "str", "outcome of the measurement", allowed=STATUSES),
        Column("note", "str", "free text (error message, fallbacks used)", nullable=True),
        Column("check", "str", "restriction check (SM / clock read-back, binding check) as recorded by the "
               "measuring script (traintime.emulation.trust); rows other than passed / not_needed never "
               "reach a table; empty = derived from the read-back columns on load", required=False,
               nullable=True, allowed=CHECKS),
        Column("synthetic", "bool", "True only for rows made by fakes or tests, never for measurements"),
    ),
    extra_note=("`status=ok` rows have a positive `latency_ms`; `oom` rows have `oom=True` and no "
                "latency. Rows with `synthetic=True` are refused by the analysis unless a test asks "
                "for them. Rows whose restriction `check` is failed or skipped stay in the raw files "
                "and are excluded from every table."),
)

#: Model families used by the analysis (see traintime.emulation.traces.model_family).
FAMILIES: tuple[str, ...] = ("CNN", "Transformer", "Hybrid", "MLP")
#: Values of the collector's `cleanup` column (empty = not flagged).
CLEANUP_FLAGS: tuple[str, ...] = ("precision_artifact", "slow_outlier")

TARGET_TRACE = TableSchema(
    name="target_trace",
    description=(
        "One training-step latency of the public consumer-GPU traces (timm model, SGD step, "
        "CUDA-graph timer, minimum of 10 replays), normalised: canonical GPU names, one row per "
        "(gpu, workload)."),
    key=("gpu", "model", "img_px", "batch_size", "precision"),
    columns=(
        Column("gpu", "str", "canonical target GPU name"),
        Column("model", "str", "timm model name"),
        Column("family", "str", "model family (rule-based, see traces.model_family)", allowed=FAMILIES),
        Column("img_px", "int", "input height = width, pixels", min=1),
        Column("batch_size", "int", "samples per step", min=1),
        Column("precision", "str", "autocast precision", allowed=PRECISIONS),
        Column("latency_ms", "float", "training-step latency, ms; empty when oom", min=0, nullable=True,
               target=True, required_when=("oom", False)),
        Column("oom", "bool", "the workload ran out of device memory on this GPU"),
        Column("cleanup", "str", "the collector's after-the-fact flag (empty = not flagged)",
               nullable=True, allowed=CLEANUP_FLAGS),
        Column("vram_gb", "float", "device memory as recorded by the collector, GB", min=0, nullable=True),
        Column("trace_file", "str", "stem of the source trace file"),
    ),
)
