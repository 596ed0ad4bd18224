"""GPU specification table: one row per GPU, canonical names and driver/vendor aliases.

The packaged table (``resources/gpu_specs.csv``) records for every GPU the SM count, CUDA cores,
clocks, memory, bandwidth, L2, peak FP32/FP16/FP64 (GFLOP/s, non-tensor, as TechPowerUp lists
them), an on-demand price where one is known (with provider and date) and the source of the row.
``config.yaml: gpu_specs`` can point to another CSV with the same schema.

Names are resolved case-insensitively, ignoring spaces, underscores and dashes, against the
canonical name and the ``;``-separated aliases (``Tesla T4``, ``NVIDIA_GeForce_RTX_5090``, ...).
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path

import pandas as pd

from traintime.core.errors import SchemaError, unknown_name
from traintime.core.io import read_csv
from traintime.core.schema import Column, TableSchema

GPU_SPECS = TableSchema(
    name="gpu_specs",
    description="One row per GPU model. Peak throughputs are vendor/TechPowerUp nominal values.",
    key=("gpu",),
    columns=(
        Column("gpu", "str", "canonical name (e.g. `T4`, `RTX-4090`)"),
        Column("aliases", "str", "`;`-separated other names (nvidia-smi, trace files, vendor)", nullable=True),
        Column("architecture", "str", "micro-architecture (Ampere, Ada Lovelace, ...)"),
        Column("compute_capability", "float", "CUDA compute capability", min=1),
        Column("sms", "int", "streaming multiprocessors", min=1),
        Column("cuda_cores", "int", "FP32 CUDA cores", min=1),
        Column("tensor_cores", "int", "tensor cores", min=0, nullable=True),
        Column("base_clock_mhz", "float", "base core clock", min=1),
        Column("boost_clock_mhz", "float", "boost core clock", min=1),
        Column("memory_clock_mhz", "float", "memory clock", min=1, nullable=True),
        Column("memory_gb", "float", "device memory", min=0.1),
        Column("memory_type", "str", "GDDR6, HBM2e, ...", nullable=True),
        Column("memory_bus_bits", "int", "memory bus width", min=1, nullable=True),
        Column("memory_bandwidth_gbps", "float", "memory bandwidth, GB/s", min=1),
        Column("l2_mb", "float", "L2 cache, MB", min=0, nullable=True),
        Column("fp32_gflops", "float", "peak FP32, GFLOP/s (non-tensor)", min=1),
        Column("fp16_gflops", "float", "peak FP16, GFLOP/s (non-tensor)", min=0, nullable=True),
        Column("fp64_gflops", "float", "peak FP64, GFLOP/s", min=0, nullable=True),
        Column("bus", "str", "host interface", nullable=True),
        Column("price_per_hour_usd", "float", "on-demand price per GPU-hour, if known", min=0, nullable=True),
        Column("price_provider", "str", "where the price was seen", nullable=True),
        Column("price_date", "str", "when the price was seen", nullable=True),
        Column("price_source", "str", "public page the price was read from (empty: no price)", nullable=True),
        Column("spec_source", "str", "source of the row"),
    ),
)


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).lower()


def default_specs_path() -> Path:
    return Path(str(resources.files("traintime") / "resources" / "gpu_specs.csv"))


@lru_cache(maxsize=8)
def _load(path: str) -> pd.DataFrame:
    df = GPU_SPECS.validate(read_csv(path, dtype={"price_date": str}), source=path)  # a year stays "2025"
    seen: dict[str, str] = {}
    for gpu, aliases in zip(df["gpu"], df["aliases"]):
        for name in [gpu, *(str(aliases).split(";") if aliases else [])]:
            key = _norm(name)
            if key in seen and seen[key] != gpu:
                raise SchemaError(f"{path}: alias {name!r} names both {seen[key]} and {gpu}")
            seen[key] = gpu
    return df


def load_specs(path: str | Path | None = None) -> pd.DataFrame:
    """The validated spec table (a copy), from ``path`` or the packaged default."""
    return _load(str(path or default_specs_path())).copy()


def alias_map(specs: pd.DataFrame) -> dict[str, str]:
    """Normalised name -> canonical name, for every canonical name and alias."""
    out: dict[str, str] = {}
    for gpu, aliases in zip(specs["gpu"], specs["aliases"]):
        for name in [gpu, *(str(aliases).split(";") if aliases else [])]:
            out[_norm(name)] = gpu
    return out


def canonical_gpu(name: str, specs: pd.DataFrame | None = None) -> str:
    """Canonical name of ``name``; :class:`~traintime.core.errors.UnknownNameError` with close matches."""
    specs = load_specs() if specs is None else specs
    amap = alias_map(specs)
    try:
        return amap[_norm(name)]
    except KeyError:
        raise unknown_name("GPU", name, specs["gpu"]) from None


def gpu_row(name: str, specs: pd.DataFrame | None = None) -> pd.Series:
    specs = load_specs() if specs is None else specs
    gpu = canonical_gpu(name, specs)
    return specs.loc[specs["gpu"] == gpu].iloc[0]


def merge_specs(base: pd.DataFrame, extra_path: str | Path) -> pd.DataFrame:
    """``base`` with the rows of the CSV at ``extra_path`` (same schema, :data:`GPU_SPECS`) added; a row
    whose ``gpu`` is already in ``base`` replaces it (e.g. your own price, with its date and source).
    Columns the file lacks are empty; the result is validated (SchemaError names file, column and row)."""
    extra = GPU_SPECS.validate(read_csv(extra_path, dtype={"price_date": str}).reindex(
        columns=[c.name for c in GPU_SPECS.columns]), source=str(extra_path))
    out = pd.concat([base[~base["gpu"].isin(set(extra["gpu"]))], extra], ignore_index=True)
    out = GPU_SPECS.validate(out, source=f"{extra_path} over the GPU spec table")
    seen: dict[str, str] = {}
    for gpu, aliases in zip(out["gpu"], out["aliases"]):
        for name in [gpu, *(str(aliases).split(";") if isinstance(aliases, str) and aliases else [])]:
            if _norm(name) in seen and seen[_norm(name)] != gpu:
                raise SchemaError(f"{extra_path}: name {name!r} of {gpu} already names {seen[_norm(name)]}")
            seen[_norm(name)] = gpu
    return out


def merged_specs_file(base_path: str | Path | None, extra_path: str | Path) -> str:
    """Path of a CSV holding :func:`merge_specs` of the table at ``base_path`` (None: the packaged
    one) and ``extra_path``, written to a temporary folder (content-addressed, reused)."""
    import hashlib
    import tempfile

    merged = merge_specs(load_specs(base_path), extra_path)
    text = merged.to_csv(index=False, lineterminator="\n")
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / f"traintime_gpu_specs_{digest}.csv"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return str(path)


#: RTX series digit -> GPU generation (consumer cards of the public traces)
GENERATIONS = {"3": "Ampere", "4": "Ada", "5": "Blackwell"}


def rtx_generation(gpu: str) -> str:
    """Ampere / Ada / Blackwell of an RTX 30 / 40 / 50 card ('other' when the name has no such number)."""
    import re

    m = re.search(r"RTX[\s_-]*([345])0\d0", str(gpu), flags=re.I)
    return GENERATIONS[m.group(1)] if m else "other"
