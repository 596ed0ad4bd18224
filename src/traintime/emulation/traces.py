"""Retrieve and normalise the public consumer-GPU training-step traces (zero-shot paper).

Source files (``gpu_traces/NVIDIA_GeForce_RTX_<X>.csv`` of the ``gpu_profiler`` source) have the
columns ``model, img_size, batch_size, precision, avg_time_ms, oom, gpu, vram_gb, cleanup``; one
row per (model, input size, batch size, precision). :func:`retrieve_traces` copies every pinned
file it can get (a file that neither the mirror nor the URL has is skipped with a warning; a
checksum mismatch is an error) and :func:`normalise_traces` turns them into the
:data:`~traintime.emulation.schema.TARGET_TRACE` table.

Model families (:func:`model_family`) are assigned by name prefix, from the architecture each timm
family is built on:

- ``MLP``: MLP-Mixer (``mixer_``) and ResMLP (``resmlp_``): token mixing by MLPs only.
- ``Hybrid``: convolution and self-attention in one network: CoAtNet, MaxViT, MobileViT (v1, v2).
- ``Transformer``: attention-only token mixing after a patch embedding: ViT, DeiT, BEiT, Swin
  (v1, v2-cr), PVT-v2, Twins, XCiT.
- ``CNN``: everything convolutional: ResNet/ResNeXt/Wide-ResNet, RegNet, DenseNet, EfficientNet
  (v1, v2), MobileNet v2/v3, ConvNeXt (v1, v2), NFNet, RepVGG, and FastViT t8/t12 (their token
  mixer is RepMixer, a depth-wise convolution; the attention variants sa/ma are not in the traces).

On the 60 traced models this gives 32 CNNs, 18 Transformers, 8 Hybrids and 2 MLPs, the counts of
the paper's Table 5. A model matching no rule raises :class:`~traintime.core.errors.UnknownNameError`.

Cleanup policy: rows flagged in ``cleanup`` are kept in the normalised table (with the flag) and
excluded from metrics by :func:`evaluation_slice` unless ``include_cleanup`` is set
(``config: emulation.include_cleanup``).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from traintime.core.errors import SchemaError, UnknownNameError
from traintime.core.io import read_csv, reject_duplicate_rows
from traintime.core.schema import Column, TableSchema
from traintime.core.specs import canonical_gpu, load_specs
from traintime.data.retrieve import Source, retrieve_optional
from traintime.emulation.schema import TARGET_TRACE

log = logging.getLogger(__name__)

#: (regular expression on the timm name, family); first match wins.
FAMILY_RULES: tuple[tuple[str, str], ...] = (
    (r"^(mixer_|resmlp_|gmlp_)", "MLP"),
    (r"^(coatnet|maxvit|mobilevit|coat_)", "Hybrid"),
    (r"^(vit_|deit|beit|swin|pvt_|twins_|xcit_|cait_)", "Transformer"),
    (r"^(resnet|resnext|wide_resnet|regnet|densenet|efficientnet|mobilenet|convnext|nfnet|dm_nfnet|"
     r"repvgg|fastvit_t|fastvit_s|vgg|inception)", "CNN"),
)

#: Columns of a raw trace file.
RAW_TRACE = TableSchema(
    name="gpu_profiler_trace",
    description="A raw trace file of the gpu_profiler source (one GPU).",
    columns=(
        Column("model", "str"), Column("img_size", "int", min=1), Column("batch_size", "int", min=1),
        Column("precision", "str", allowed=("fp32", "fp16", "bf16")),
        Column("avg_time_ms", "float", min=0, nullable=True), Column("oom", "bool"), Column("gpu", "str"),
        Column("vram_gb", "float", nullable=True), Column("cleanup", "str", nullable=True),
    ),
)

MANIFEST = TableSchema(
    name="trace_manifest",
    description="One row per pinned trace file: whether it could be retrieved, and from where.",
    key=("trace_file",),
    columns=(
        Column("trace_file", "str", "stem of the pinned file"),
        Column("gpu", "str", "canonical GPU name"),
        Column("present", "bool", "the file was retrieved and verified"),
        Column("origin", "str", "mirror path or URL used; empty when absent", nullable=True),
        Column("sha256", "str", "pinned sha256"),
        Column("reason", "str", "why the file is absent", nullable=True),
    ),
)


def model_family(model: str) -> str:
    """Family (CNN | Transformer | Hybrid | MLP) of a timm model name (rules in the module doc)."""
    for pattern, family in FAMILY_RULES:
        if re.match(pattern, model):
            return family
    raise UnknownNameError(f"no model family rule matches timm model {model!r}: add a prefix rule to "
                           "traintime.emulation.traces.FAMILY_RULES")


def retrieve_traces(source: Source, dest_dir: str | os.PathLike[str], mirror: Path | None,
                    allow_download: bool = True, specs: pd.DataFrame | None = None,
                    timeout_s: float = 60.0) -> pd.DataFrame:
    """Retrieve every pinned file of ``source`` into ``dest_dir``; return the manifest.

    A file that can be had neither from the mirror nor the URL is logged and recorded as absent;
    a :class:`~traintime.core.errors.ChecksumError` propagates (a corrupt copy is never skipped).
    ``dest_dir`` receives ``<path relative to the source's folder>`` (``gpu_traces/X.csv`` ->
    ``dest_dir/X.csv``).
    """
    specs = load_specs() if specs is None else specs
    Path(dest_dir).mkdir(parents=True, exist_ok=True)
    rows = []
    for rec in retrieve_optional(source, dest_dir, mirror, allow_download=allow_download, timeout_s=timeout_s,
                                 flatten=True):
        path = str(rec.pop("path"))
        stem = Path(path).stem
        rows.append({"trace_file": stem, "gpu": canonical_gpu(stem, specs), "sha256": source.files[path], **rec})
    return MANIFEST.validate(pd.DataFrame(rows), source="trace manifest")


def _read_trace(path: Path) -> pd.DataFrame:
    df = RAW_TRACE.validate(reject_duplicate_rows(read_csv(path), str(path)), source=str(path))
    return df


def normalise_traces(paths: Iterable[str | os.PathLike[str]], specs: pd.DataFrame | None = None) -> pd.DataFrame:
    """Concatenate raw trace files into the validated :data:`TARGET_TRACE` table (sorted rows).

    The GPU named inside each file must resolve to the same canonical GPU as the file name.
    """
    specs = load_specs() if specs is None else specs
    frames = []
    for p in sorted(Path(x) for x in paths):
        df = _read_trace(p)
        gpu = canonical_gpu(p.stem, specs)
        inside = {canonical_gpu(g, specs) for g in df["gpu"].unique()}
        if inside != {gpu}:
            raise SchemaError(f"{p}: column 'gpu' names {sorted(inside)}, but the file name names {gpu}")
        ok = ~df["oom"]
        bad = ok & (df["avg_time_ms"].isna() | (df["avg_time_ms"] <= 0))
        if bad.any():
            i = int(bad.to_numpy().nonzero()[0][0])
            raise SchemaError(f"{p}: row {i + 2}: oom is False but avg_time_ms is {df['avg_time_ms'].iloc[i]!r}")
        frames.append(pd.DataFrame({
            "gpu": gpu,
            "model": df["model"],
            "family": [model_family(m) for m in df["model"]],
            "img_px": df["img_size"],
            "batch_size": df["batch_size"],
            "precision": df["precision"],
            "latency_ms": df["avg_time_ms"].where(ok),
            "oom": df["oom"],
            "cleanup": df["cleanup"],
            "vram_gb": df["vram_gb"],
            "trace_file": p.stem,
        }))
    if not frames:
        raise SchemaError("no trace files to normalise (none could be retrieved)")
    out = pd.concat(frames, ignore_index=True)
    out = out.sort_values(list(TARGET_TRACE.key)).reset_index(drop=True)
    return TARGET_TRACE.validate(out, source="normalised traces")


def load_traces(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and validate ``results/data/traces.csv``."""
    return TARGET_TRACE.validate(read_csv(path), source=str(path))


def evaluation_slice(traces: pd.DataFrame, precision: str | None = "fp32", batch_size: int | None = 16,
                     include_cleanup: bool = False, exclude_models: Sequence[str] = (),
                     drop_oom: bool = True) -> pd.DataFrame:
    """Rows used for metrics: one precision / batch size (None = all), no OOM rows, and no
    ``cleanup``-flagged rows unless ``include_cleanup``; ``exclude_models`` are dropped."""
    df = traces
    if precision is not None:
        df = df[df["precision"] == precision]
    if batch_size is not None:
        df = df[df["batch_size"] == batch_size]
    if drop_oom:
        df = df[~df["oom"].astype(bool) & df["latency_ms"].notna()]
    if not include_cleanup:
        df = df[df["cleanup"].isna()]
    if exclude_models:
        df = df[~df["model"].isin(list(exclude_models))]
    return df.reset_index(drop=True)
