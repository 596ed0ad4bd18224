"""CHRONOS iteration-time release -> the canonical ``iteration`` table.

The CHRONOS release ships one CSV per model family (``epoch_time_prediction/data/{CNN,MLP,
Transformer}.csv``, 3840 + 5760 + 1080 rows) with different column names and spreadsheet
artefacts (``TRUE``/``FALSE`` booleans, FLOP counts rounded to ``1.06E+11``). This module maps the
three files onto one table, :data:`ITERATION`, with lower_snake_case names carrying their units,
real booleans and numbers, canonical GPU names (:func:`traintime.core.specs.canonical_gpu`), a row id,
and a configuration key that groups the learning-rate replicates of one configuration.

Column order of the release matters: the released XGBoost scripts sample columns
(``colsample_bytree=0.9``) in the order the CSV lists them, so the paper-faithful feature set
(:mod:`traintime.chronos.features`) needs each family's columns in raw order. That order is a property of
the pinned release, so it is recorded here in code (:data:`RAW_COLUMNS`, an ordered raw ->
canonical mapping per family; :func:`family_columns` gives the canonical names in raw order) and
:func:`normalise_iteration` checks that every file has exactly these columns. The sorted table keeps
the raw row order within a family (``raw_row``), which the released random split depends on.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError, UnknownNameError
from traintime.core.io import read_csv, reject_duplicate_rows, write_csv
from traintime.core.schema import Column, TableSchema
from traintime.core.specs import _norm, alias_map, load_specs

log = logging.getLogger(__name__)

FAMILIES: tuple[str, ...] = ("CNN", "MLP", "Transformer")
SOURCE = "chronos-release"

# --- raw -> canonical column names, in the order of each released CSV -------------------------------
_GPU_SPEC_RAW: tuple[tuple[str, str], ...] = (
    ("Base Clock (MHz)", "base_clock_mhz"),
    ("Boost Clock (MHz)", "boost_clock_mhz"),
    ("Memory Clock (MHz)", "memory_clock_mhz"),
    ("Memory (GB)", "memory_gb"),
    ("Memory Type", "memory_type"),
    ("Memory Bus (bit)", "memory_bus_bits"),
    ("GPU Memory Bandwidth (GB/s)", "memory_bandwidth_gbps"),
    ("Bus", "bus"),
    ("Cores", "cuda_cores"),
    ("TMUs", "tmus"),
    ("ROPs", "rops"),
    ("SM", "sms"),
    ("TC", "tensor_cores"),
    ("RT", "rt_cores"),
    ("PR", "pixel_rate_gpixel_s"),
    ("TR", "texture_rate_gtexel_s"),
    ("FP16", "fp16_gflops"),
    ("FP32", "fp32_gflops"),
    ("FP64", "fp64_gflops"),
)

RAW_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "CNN": (
        ("dataset", "dataset"), ("input_shape", "input_shape"), ("num_classes", "num_classes"),
        ("dataset_size", "dataset_size"), ("optimizer", "optimizer"), ("learning_rate", "learning_rate"),
        ("batch_size", "batch_size"), ("precision", "precision_bits"), ("amp", "amp"), ("model", "model"),
        ("architecture", "architecture"), ("depth", "depth"), ("param_count", "param_count"),
        ("param_bytes", "param_bytes"), ("optimizer_state_bytes", "optimizer_state_bytes"),
        ("master_param_bytes", "master_param_bytes"), ("total_state_bytes", "total_state_bytes"),
        ("flops_fwd_per_sample", "flops_fwd_per_sample"), ("flops_train_per_sample", "flops_train_per_sample"),
        ("flops_train_per_batch", "flops_train_per_batch"),
        ("act_bytes_per_sample_proxy", "act_bytes_per_sample_proxy"),
        ("arithmetic_intensity_train", "arithmetic_intensity_flop_per_byte"),
        ("flops_1x1_frac", "flops_1x1_frac"), ("flops_3x3_frac", "flops_3x3_frac"),
        ("flops_depthwise_frac", "flops_depthwise_frac"), ("flops_grouped_frac", "flops_grouped_frac"),
        ("bn_layers", "bn_layers"), ("act_layers", "act_layers"), ("sum_hwC", "sum_hwc"), ("max_hwC", "max_hwc"),
        ("avg_batch_time_ms", "step_time_ms"), ("p90_batch_time_ms", "p90_step_time_ms"),
        ("loader_wait_ms", "loader_wait_ms"), ("compute_ms", "compute_time_ms"), ("loader_ratio", "loader_ratio"),
        ("gpu_name", "gpu_reported"), ("Provisioning", "provider"),
        *_GPU_SPEC_RAW,
    ),
    "MLP": (
        ("dataset", "dataset"), ("input_shape", "input_shape"), ("num_classes", "num_classes"),
        ("dataset_size", "dataset_size"), ("learning_rate", "learning_rate"), ("batch_size", "batch_size"),
        ("optimizer", "optimizer"), ("precision", "precision_bits"), ("amp", "amp"), ("model", "model"),
        ("architecture", "architecture"), ("embed_dim", "embed_dim"), ("depth", "depth"),
        ("patch_size", "patch_size"), ("token_mlp_dim", "token_mlp_dim"), ("channel_mlp_dim", "channel_mlp_dim"),
        ("num_patches", "num_patches"), ("param_count", "param_count"),
        ("avg_batch_time_ms", "step_time_ms"), ("p90_batch_time_ms", "p90_step_time_ms"),
        ("avg_loader_ms", "loader_wait_ms"), ("avg_compute_ms", "compute_time_ms"),
        ("flops_fwd_per_sample", "flops_fwd_per_sample"), ("flops_train_per_sample", "flops_train_per_sample"),
        ("flops_train_per_batch", "flops_train_per_batch"), ("param_bytes", "param_bytes"),
        ("optimizer_state_bytes", "optimizer_state_bytes"), ("master_param_bytes", "master_param_bytes"),
        ("total_state_bytes", "total_state_bytes"), ("act_bytes_per_sample_proxy", "act_bytes_per_sample_proxy"),
        ("arithmetic_intensity_train", "arithmetic_intensity_flop_per_byte"),
        ("gpu_name", "gpu_reported"), ("Provisioning", "provider"),
        *_GPU_SPEC_RAW,
        ("$/hr", "price_per_hour_usd"),
    ),
    "Transformer": (
        ("dataset", "dataset"), ("dataset_size", "dataset_size"), ("seq_len", "seq_len"), ("src_len", "src_len"),
        ("learning_rate", "learning_rate"), ("batch_size", "batch_size"),
        ("effective_batch_size", "effective_batch_size"), ("precision", "precision_bits"),
        ("amp_enabled", "amp"), ("optimizer", "optimizer"), ("model", "model"), ("architecture", "architecture"),
        ("arch_family", "arch_family"), ("depth", "depth"), ("d_model", "d_model"), ("n_heads", "n_heads"),
        ("d_head", "d_head"), ("d_ff", "d_ff"), ("ffn_multiplier", "ffn_multiplier"),
        ("activation", "activation"), ("norm_style", "norm_style"), ("norm_impl", "norm_impl"),
        ("positional_encoding", "positional_encoding"), ("attention_pattern", "attention_pattern"),
        ("param_count", "param_count"), ("param_bytes", "param_bytes"),
        ("optimizer_state_bytes", "optimizer_state_bytes"), ("master_param_bytes", "master_param_bytes"),
        ("total_state_bytes", "total_state_bytes"), ("flops_fwd_per_token", "flops_fwd_per_token"),
        ("flops_train_per_seq", "flops_train_per_sample"), ("flops_train_per_batch", "flops_train_per_batch"),
        ("act_bytes_per_seq_proxy", "act_bytes_per_sample_proxy"),
        ("arithmetic_intensity_train", "arithmetic_intensity_flop_per_byte"),
        ("avg_batch_time_ms", "step_time_ms"), ("p90_batch_time_ms", "p90_step_time_ms"),
        ("loader_wait_ms", "loader_wait_ms"), ("compute_ms", "compute_time_ms"), ("loader_ratio", "loader_ratio"),
        ("examples_per_sec", "examples_per_sec"),
        ("gpu_name", "gpu_reported"), ("Provisioning", "provider"),
        *_GPU_SPEC_RAW,
        ("$/hr", "price_per_hour_usd"),
    ),
}

#: Input resolution of the vision Transformers: the release's collection script resizes every image
#: to 224 x 224 (ViT-B/16 and DeiT-Tiny/16 at 224 px); the CSV has no input_shape column for them.
TRANSFORMER_IMAGE_PX = 224
TEXT_DATASETS = frozenset({"IMDB", "SST2"})


def family_columns(family: str) -> list[str]:
    """Canonical names of ``family``'s released columns, in the order of the released CSV."""
    try:
        return [canon for _raw, canon in RAW_COLUMNS[family]]
    except KeyError:
        from traintime.core.errors import unknown_name

        raise unknown_name("model family", family, FAMILIES) from None


# --- the canonical table ---------------------------------------------------------------------------
def _c(name: str, dtype: str, description: str, **kw: object) -> Column:
    kw.setdefault("required", False)
    kw.setdefault("nullable", True)
    return Column(name, dtype, description, **kw)  # type: ignore[arg-type]


def _req(name: str, dtype: str, description: str, **kw: object) -> Column:
    return Column(name, dtype, description, **kw)  # type: ignore[arg-type]


ITERATION = TableSchema(
    name="iteration",
    description=(
        "One row per timed training configuration (one learning rate): the measured time of one "
        "training step (iteration) and the configuration's descriptors. Rows from the CHRONOS release "
        "have `source = chronos-release`; each configuration appears three times, differing only in "
        "the learning rate, which cannot change the step time (`config_key` groups the replicates). "
        "Columns a family does not have are empty. Rows are sorted by `family`, `raw_row`."
    ),
    key=("row_id",),
    checks=(lambda df, where: check_config_keys(df, where),),
    extra_note=(
        "Released spreadsheet artefacts: `TRUE`/`FALSE` are parsed as booleans; FLOP counts written "
        "in exponent notation (`1.06E+11`) are parsed as numbers but keep the release's rounding "
        "(3 significant figures in MLP/Transformer, 6 in CNN); `spreadsheet_rounded` marks those rows. "
        "`flops_train_per_sample * batch_size` recovers the exact per-batch count. GPU spec columns "
        "are kept as shipped in the release CSVs (e.g. V100-SXM2 listed with bus `PCIe 3.0`); the "
        "honest feature set joins specs from the GPU spec table instead. The raw column order of "
        "each release file is recorded in `traintime.data.chronos.RAW_COLUMNS`."
    ),
    columns=(
        # identity and provenance
        _req("row_id", "str", "row id: `<family>:<raw_row>` (five digits) for release rows"),
        _req("source", "str", "where the row comes from (`chronos-release` for the CHRONOS CSVs)"),
        _req("family", "str", "model family; one CHRONOS file and one fitted model per family",
             allowed=FAMILIES),
        _c("raw_row", "int", "0-based data row in the source file (the released random split depends on "
                             "this order)", min=0),
        _req("config_key", "str", "configuration without the learning rate: family, model, dataset, optimizer, "
                                  "`b<batch>`, `fp<bits>`, `amp<0/1>`, gpu and `p<param_count>` joined by a "
                                  "vertical bar; groups the learning-rate replicates"),
        _req("status", "str", "`ok` for a completed measurement (`oom`, `error` for local failures)",
             allowed=("ok", "oom", "error")),
        _c("spreadsheet_rounded", "bool", "a FLOP count of this row was rounded by a spreadsheet in the "
                                          "release (exponent notation such as `1.06E+11`)"),
        # workload configuration
        _req("model", "str", "model name as in the release (`resnet50`, `mixer`, `ViT`, ...)"),
        _c("architecture", "str", "family as written in the release (`CNN`, `MLP`, `Transformer`)"),
        _req("dataset", "str", "dataset name (`CIFAR10`, `TinyImageNet`, `SST2`, ...)"),
        _c("dataset_size", "int", "training samples in the dataset", min=1),
        _c("num_classes", "int", "classes of the classification head", min=1),
        _c("input_shape", "str", "image input shape `(C, H, W)` as shipped (images of CNN/MLP rows)"),
        _c("input_channels", "int", "image channels, from `input_shape`", min=1),
        _c("input_px", "int", "image side in pixels: from `input_shape`, or 224 for the vision "
                              "Transformers (the release's collection script resizes to 224); empty for text",
           min=1),
        _c("seq_len", "int", "tokens per sample (Transformer; 196 patches for 224-px images)", min=1),
        _c("src_len", "int", "source sequence length (Transformer)", min=1),
        _req("optimizer", "str", "optimizer (`SGD`, `AdamW`, `Adam`, `Adafactor`)"),
        _req("learning_rate", "float", "learning rate (cannot change the step time)", min=0),
        _req("batch_size", "int", "samples per step", min=1),
        _c("effective_batch_size", "int", "samples per optimizer step (Transformer)", min=1),
        _req("precision_bits", "int", "training precision in bits: 16 (mixed precision) or 32", min=8, max=64),
        _req("amp", "bool", "automatic mixed precision enabled"),
        # architecture descriptors
        _c("depth", "int", "layers / blocks as the release counts them", min=1),
        _c("embed_dim", "int", "token embedding width (MLP)", min=1),
        _c("patch_size", "int", "patch side in pixels (MLP)", min=1),
        _c("token_mlp_dim", "int", "token-mixing MLP width (MLP)", min=1),
        _c("channel_mlp_dim", "int", "channel-mixing MLP width (MLP)", min=1),
        _c("num_patches", "int", "patches per image (MLP)", min=1),
        _c("arch_family", "str", "Transformer layout (`encoder_only`)"),
        _c("d_model", "int", "model width (Transformer)", min=1),
        _c("n_heads", "int", "attention heads (Transformer)", min=1),
        _c("d_head", "int", "width per head (Transformer)", min=1),
        _c("d_ff", "int", "feed-forward width (Transformer)", min=1),
        _c("ffn_multiplier", "float", "d_ff / d_model (Transformer)", min=0),
        _c("activation", "str", "activation (Transformer)"),
        _c("norm_style", "str", "normalisation placement (Transformer)"),
        _c("norm_impl", "str", "normalisation layer (Transformer)"),
        _c("positional_encoding", "str", "positional encoding (Transformer)"),
        _c("attention_pattern", "str", "attention pattern (Transformer)"),
        _c("conv_linear_modules", "int", "Conv2d + Linear modules of one forward pass as the analytic walk counts "
           "them (local rows; the release has none, and its depth counts blocks for MLP / Transformer)", min=1),
        _c("bn_layers", "int", "batch-norm layers (CNN)", min=0),
        _c("act_layers", "int", "activation layers (CNN)", min=0),
        _c("sum_hwc", "int", "sum over conv outputs of H*W*C per sample, elements (CNN)", min=0),
        _c("max_hwc", "int", "largest conv output H*W*C per sample, elements (CNN)", min=0),
        _c("flops_1x1_frac", "float", "share of FLOPs in 1x1 convolutions (CNN)", min=0, max=1),
        _c("flops_3x3_frac", "float", "share of FLOPs in 3x3 convolutions (CNN)", min=0, max=1),
        _c("flops_depthwise_frac", "float", "share of FLOPs in depthwise convolutions (CNN)", min=0, max=1),
        _c("flops_grouped_frac", "float", "share of FLOPs in grouped convolutions (CNN)", min=0, max=1),
        # analytic cost descriptors
        _c("param_count", "int", "trainable parameters", min=1),
        _c("param_bytes", "int", "parameter memory, bytes", min=0),
        _c("optimizer_state_bytes", "int", "optimizer state memory, bytes", min=0),
        _c("master_param_bytes", "int", "fp32 master copy of the parameters under mixed precision, bytes", min=0),
        _c("total_state_bytes", "int", "parameters + optimizer state + master copy, bytes", min=0),
        _c("flops_fwd_per_sample", "float", "forward FLOPs per sample (CNN, MLP)", min=0),
        _c("flops_fwd_per_token", "float", "forward FLOPs per token (Transformer)", min=0),
        _c("flops_train_per_sample", "float", "training (forward + backward) FLOPs per sample (per sequence "
                                              "for Transformer; released as `flops_train_per_seq`)", min=0),
        _c("flops_train_per_batch", "float", "training FLOPs per step (as shipped, may be rounded; see note)",
           min=0),
        _c("act_bytes_per_sample_proxy", "float", "activation memory proxy per sample, bytes (per sequence for "
                                                  "Transformer; released as `act_bytes_per_seq_proxy`)", min=0),
        _c("arithmetic_intensity_flop_per_byte", "float", "training FLOPs per byte moved, as the release "
                                                          "computes it (`arithmetic_intensity_train`)", min=0),
        # measurement (target and target-derived columns)
        _req("step_time_ms", "float", "mean wall time of one training step over 20 steps after 5 warm-up steps: "
                                      "DataLoader wait (2 workers) + synchronised forward/backward/optimizer step "
                                      "(release: `avg_batch_time_ms`); empty for `oom` / `error` rows",
             min=0, target=True, nullable=True, required_when=("status", "ok")),
        _c("p90_step_time_ms", "float", "90th percentile of the step time (release: `p90_batch_time_ms`)",
           min=0, target_derived=True),
        _c("loader_wait_ms", "float", "mean time waiting for the DataLoader per step (release: `loader_wait_ms` "
                                      "/ `avg_loader_ms`)", min=0, target_derived=True),
        _c("compute_time_ms", "float", "mean synchronised compute time per step (release: `compute_ms` / "
                                       "`avg_compute_ms`)", min=0, target_derived=True),
        _c("loader_ratio", "float", "loader_wait_ms / step_time_ms as shipped (CNN, Transformer); the released "
                                    "scripts keep it as a feature", min=0, max=1, target_derived=True),
        _c("examples_per_sec", "float", "batch_size / step time, samples per second (Transformer)", min=0,
           target_derived=True),
        # GPU and host
        _req("gpu", "str", "canonical GPU name (`traintime.core.specs.canonical_gpu`; e.g. `T4`, `A100-PCIe-80GB`)"),
        _c("gpu_reported", "str", "GPU name as reported in the source (`nvidia-smi` name)"),
        _c("provider", "str", "cloud provider of the host (`GCP`, `RunPod`); confounded with the GPU"),
        _c("base_clock_mhz", "float", "base core clock, MHz (as shipped)", min=0),
        _c("boost_clock_mhz", "float", "boost core clock, MHz (as shipped)", min=0),
        _c("memory_clock_mhz", "float", "memory clock, MHz (as shipped)", min=0),
        _c("memory_gb", "float", "device memory, GB (as shipped)", min=0),
        _c("memory_type", "str", "memory technology (`GDDR6`, `HBM2e`, ...; as shipped)"),
        _c("memory_bus_bits", "int", "memory bus width, bits (as shipped)", min=1),
        _c("memory_bandwidth_gbps", "float", "memory bandwidth, GB/s (as shipped)", min=0),
        _c("bus", "str", "host interface (`PCIe 3.0`, ...; as shipped)"),
        _c("cuda_cores", "int", "FP32 CUDA cores (as shipped)", min=1),
        _c("tmus", "int", "texture mapping units (as shipped)", min=0),
        _c("rops", "int", "render output units (as shipped)", min=0),
        _c("sms", "int", "streaming multiprocessors (as shipped)", min=1),
        _c("tensor_cores", "int", "tensor cores (as shipped)", min=0),
        _c("rt_cores", "int", "ray-tracing cores (as shipped)", min=0),
        _c("pixel_rate_gpixel_s", "float", "pixel fill rate, GPixel/s (as shipped)", min=0),
        _c("texture_rate_gtexel_s", "float", "texture fill rate, GTexel/s (as shipped)", min=0),
        _c("fp16_gflops", "float", "peak FP16 (non-tensor), GFLOP/s (as shipped)", min=0),
        _c("fp32_gflops", "float", "peak FP32, GFLOP/s (as shipped)", min=0),
        _c("fp64_gflops", "float", "peak FP64, GFLOP/s (as shipped)", min=0),
        _c("price_per_hour_usd", "float", "on-demand price per GPU-hour, USD (MLP and Transformer files only)",
           min=0),
    ),
)

ITERATION_TARGET = "step_time_ms"

# the columns that identify a configuration (without the learning rate)
CONFIG_KEY_COLUMNS: tuple[str, ...] = ("family", "model", "dataset", "optimizer", "batch_size",
                                       "precision_bits", "amp", "gpu", "param_count")


def config_keys(df: pd.DataFrame) -> pd.Series:
    """``config_key`` of each row (see :data:`ITERATION`); missing ``param_count`` gives ``p``."""
    pc = df["param_count"] if "param_count" in df else pd.Series([None] * len(df), index=df.index)
    pc_s = pc.map(lambda v: "" if v is None or pd.isna(v) else str(int(v)))
    amp = df["amp"].map(lambda v: "1" if bool(v) else "0")
    return (df["family"].astype(str) + "|" + df["model"].astype(str) + "|" + df["dataset"].astype(str) + "|"
            + df["optimizer"].astype(str) + "|b" + df["batch_size"].astype(int).astype(str)
            + "|fp" + df["precision_bits"].astype(int).astype(str) + "|amp" + amp + "|"
            + df["gpu"].astype(str) + "|p" + pc_s)


_ITERATION_UNKEYED = dataclasses.replace(ITERATION, checks=())


def check_config_keys(df: pd.DataFrame, where: str) -> None:
    """A row's ``config_key`` must be the one its own columns give (``ITERATION.checks``)."""
    if "config_key" not in df.columns or not set(CONFIG_KEY_COLUMNS[:-1]) <= set(df.columns):
        return
    expected = config_keys(df)
    given = df["config_key"].astype(str)
    # without a param_count the key may also end at the GPU (no empty "|p")
    bad = ((given != expected) & (given + "|p" != expected)).to_numpy()
    if bad.any():
        i = int(bad.nonzero()[0][0])
        raise SchemaError(f"{where}: column 'config_key' row {i + 2}: {df['config_key'].iloc[i]!r} contradicts "
                          f"the row's own columns, which give {expected.iloc[i]!r}")


def _parse_input_shape(s: pd.Series, where: str) -> tuple[pd.Series, pd.Series]:
    """'(3, 64, 64)' -> (channels, px). Non-square or malformed shapes are a SchemaError."""
    chans, pxs = [], []
    for i, v in enumerate(s):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            chans.append(None)
            pxs.append(None)
            continue
        parts = str(v).strip().strip("()[]").split(",")
        try:
            c, h, w = (int(p) for p in parts)
        except ValueError:
            raise SchemaError(f"{where}: column 'input_shape' row {i + 2}: {v!r} is not '(C, H, W)'") from None
        if h != w:
            raise SchemaError(f"{where}: column 'input_shape' row {i + 2}: {v!r} is not square")
        chans.append(c)
        pxs.append(h)
    return pd.Series(chans, index=s.index, dtype="Int64"), pd.Series(pxs, index=s.index, dtype="Int64")


def _read_family(path: str | os.PathLike[str], family: str, specs: pd.DataFrame) -> pd.DataFrame:
    """Read one released CSV, check its columns, rename to canonical names, add derived columns."""
    path = Path(path)
    where = f"{path}"
    raw = reject_duplicate_rows(read_csv(path), where)
    # Spreadsheet exponent notation, detected on the text before parsing.
    raw_text = read_csv(path, dtype=str, keep_default_na=False)
    mapping = dict(RAW_COLUMNS[family])
    missing = [c for c in mapping if c not in raw.columns]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {', '.join(missing)} of the {family} release file")
    extra = [c for c in raw.columns if c not in mapping]
    if extra:
        raise SchemaError(f"{where}: unexpected column(s) {', '.join(map(str, extra))} in the {family} "
                          f"release file")
    if raw.empty:
        raise SchemaError(f"{where}: no rows")
    df = raw.rename(columns=mapping)
    n = len(df)
    df.insert(0, "family", family)
    df.insert(0, "source", SOURCE)
    df["raw_row"] = np.arange(n)
    df["row_id"] = [f"{family}:{i:05d}" for i in range(n)]
    df["status"] = "ok"
    sci = np.zeros(n, dtype=bool)
    for col in raw_text.columns:
        if "flops" in col:
            sci |= raw_text[col].str.contains(r"\d[eE][+-]?\d", regex=True).to_numpy()
    df["spreadsheet_rounded"] = sci
    # architecture must agree with the family of the file
    arch = df["architecture"].astype(str)
    bad = arch != family
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise SchemaError(f"{where}: column 'architecture' row {i + 2}: {arch.iloc[i]!r} is not {family!r}")
    # GPU names -> canonical names
    amap = alias_map(specs)
    gpus = []
    for i, name in enumerate(df["gpu_reported"]):
        key = _norm(str(name))
        if key not in amap:
            from traintime.core.errors import unknown_name

            names = [*specs["gpu"], *(a for al in specs["aliases"].dropna() for a in str(al).split(";"))]
            err = unknown_name("GPU", str(name), names)
            raise UnknownNameError(f"{where}: column 'gpu_name' row {i + 2}: {err}")
        gpus.append(amap[key])
    df["gpu"] = gpus
    if "input_shape" in df:
        df["input_channels"], df["input_px"] = _parse_input_shape(df["input_shape"], where)
    elif family == "Transformer":
        vision = ~df["dataset"].isin(TEXT_DATASETS)
        df["input_px"] = pd.Series(np.where(vision, TRANSFORMER_IMAGE_PX, pd.NA), dtype="Int64")
        df["input_channels"] = pd.Series(np.where(vision, 3, pd.NA), dtype="Int64")
    # validate with file row numbers before the families are concatenated
    df["config_key"] = "?"  # filled below, from validated values (so not checked here)
    df = _ITERATION_UNKEYED.validate(df, source=where)
    df["config_key"] = config_keys(df)
    return df


def normalise_iteration(raw_csv_paths_by_family: Mapping[str, str | os.PathLike[str]],
                        specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Canonical ``iteration`` table from the released CSVs, e.g. ``{"CNN": ".../CNN.csv", ...}``.

    Returns a validated DataFrame (columns in :data:`ITERATION` order, sorted by family and raw row).
    Raises :class:`~traintime.core.errors.SchemaError` naming file, column and row for a malformed file
    and :class:`~traintime.core.errors.UnknownNameError` for a GPU missing from the spec table.
    """
    specs = load_specs() if specs is None else specs
    parts = []
    for family, path in sorted(raw_csv_paths_by_family.items()):
        if family not in RAW_COLUMNS:
            from traintime.core.errors import unknown_name

            raise unknown_name("model family", family, FAMILIES)
        parts.append(_read_family(path, family, specs))
        log.info("%s: %d rows from %s", family, len(parts[-1]), path)
    if not parts:
        raise SchemaError("normalise_iteration: no release files given")
    df = pd.concat(parts, ignore_index=True)
    cols = [c for c in ITERATION.names if c in df.columns]
    df = df[cols].sort_values(["family", "raw_row"], kind="mergesort").reset_index(drop=True)
    return ITERATION.validate(df, source="normalised iteration table")


def write_iteration(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Validate and write the table; floats are written in shortest round-trip form (exact)."""
    df = ITERATION.validate(df, source=str(path))
    write_csv(df, path, float_format=None)  # type: ignore[arg-type]


def load_iteration(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and validate a canonical ``iteration`` table (floats parsed exactly)."""
    df = read_csv(path, float_precision="round_trip", low_memory=False)
    return ITERATION.validate(df, source=str(path))
