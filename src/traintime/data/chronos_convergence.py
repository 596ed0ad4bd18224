"""The CHRONOS convergence meta-dataset as one canonical table (``convergence``).

The release ships one CSV per model family (``epoch_convergence_prediction/data/{CNN,MLP,
Transformer}.csv``, 144 + 108 + 72 = 324 training runs to early stopping, one seed each).
:func:`normalise_convergence` checks each raw file, renames its columns to the project's
lower_snake_case names with units, and stacks them into the table described by
:data:`CONVERGENCE` (one row per training run).

What is dropped, and why:

* ``param_count_log10``, ``learning_rate_log10``, ``batch_size_log10``: exactly ``log10`` of
  ``param_count``, ``learning_rate`` and ``batch_size`` (checked to 1e-6 on load); they are
  recomputed where a feature set needs them (:mod:`traintime.chronos.convergence`).
* ``architecture``: the family name (``CNN``/``MLP``/``Transformer``), kept as ``family``.

What is checked (a :class:`~traintime.core.errors.SchemaError` naming the file, column and row if not):
``T_80close == ceil(0.8 T_conv)``, ``T_90close == ceil(0.9 T_conv)``, and
``ntk_trace_proxy_log10 == 2 gradient_norm_log10`` to 1e-6 (the "NTK trace" column of the
release is ``log10(||g||^2 + 1e-8)`` of the one-batch loss gradient ``g``, not a kernel trace).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from traintime.core.errors import SchemaError, unknown_name
from traintime.core.io import read_csv, reject_duplicate_rows, write_csv
from traintime.core.schema import Column, TableSchema

#: Model families, one raw CSV each, in the release's order.
FAMILIES: tuple[str, ...] = ("CNN", "MLP", "Transformer")

#: Released model identifier -> label used in the paper's tables. DistilBERT is in the data but
#: not in the paper's convergence table.
MODEL_LABELS: dict[str, str] = {
    "asmlp": "AS-MLP",
    "mixer": "MLP-Mixer",
    "resmlp": "ResMLP",
    "densenet121": "DenseNet-121",
    "mobilenetv2": "MobileNetV2",
    "resnet50": "ResNet-50",
    "vgg16": "VGG-16",
    "DeiT-Tiny": "DeiT-Tiny",
    "ViT": "ViT",
    "DistilBERT": "DistilBERT",
}

#: The nine models of the paper's convergence table, in its row order.
PAPER_MODELS: tuple[str, ...] = ("asmlp", "mixer", "resmlp", "densenet121", "mobilenetv2",
                                 "resnet50", "vgg16", "DeiT-Tiny", "ViT")

#: The three one-batch probe features.
PROBE_COLUMNS: tuple[str, ...] = ("gradient_norm_log10", "ntk_trace_proxy_log10", "initial_loss_log10")

_MLP_DIMS = ("embed_dim", "depth", "patch_size", "token_mlp_dim", "channel_mlp_dim")

CONVERGENCE = TableSchema(
    name="convergence",
    description=(
        "One row per training run to early stopping from the CHRONOS release "
        "(`epoch_convergence_prediction/data/{CNN,MLP,Transformer}.csv`, 324 runs, one seed each). "
        "The target is `epochs_to_converge` (T_conv). Probe columns come from one forward and one "
        "backward pass on one mini-batch of the freshly initialised model (no optimizer step)."),
    key=("family", "model", "dataset", "optimizer", "learning_rate", "batch_size", "seed"),
    columns=(
        Column("family", "str", "model family, one raw CSV each (the release's `architecture`)",
               allowed=FAMILIES),
        Column("model", "str", "model identifier as released (`resnet50`, `asmlp`, `DeiT-Tiny`, ...); "
               "the same identifiers as the iteration-time data"),
        Column("dataset", "str", "training dataset (`CIFAR10`, `CIFAR100`, `STL10`, `TinyImageNet`, `IMDB`, `SST2`)"),
        Column("task", "str", "`vision_cls` or `text_cls`; given only by the Transformer file (empty for CNN/MLP)",
               required=False, nullable=True),
        Column("optimizer", "str", "optimizer (`SGD`, `AdamW`, `Adam`, `Adafactor`)"),
        Column("learning_rate", "float", "initial learning rate (constant schedule)", min=0),
        Column("batch_size", "int", "mini-batch size, samples", min=1),
        Column("precision_bits", "int", "training precision, bits (16 = AMP); absent from the Transformer file",
               required=False, nullable=True, min=8, max=64),
        Column("num_classes", "int", "number of output classes; absent from the Transformer file",
               required=False, nullable=True, min=1),
        Column("dataset_size", "int", "training samples N in one epoch", min=1),
        Column("param_count", "int", "trainable parameters P (includes the dataset-specific classifier head)", min=1),
        Column("embed_dim", "int", "token-mixing MLPs only: embedding width", required=False, nullable=True, min=1),
        Column("depth", "int", "token-mixing MLPs only: number of blocks", required=False, nullable=True, min=1),
        Column("patch_size", "int", "token-mixing MLPs only: patch size, pixels", required=False, nullable=True, min=1),
        Column("token_mlp_dim", "int", "token-mixing MLPs only: token-MLP width", required=False, nullable=True, min=1),
        Column("channel_mlp_dim", "int", "token-mixing MLPs only: channel-MLP width", required=False, nullable=True,
               min=1),
        Column("gradient_norm_log10", "float",
               "probe: log10(||g|| + 1e-8), g = gradient of the mean cross-entropy of one mini-batch w.r.t. all "
               "parameters at initialisation (model in eval mode, seed 42)"),
        Column("ntk_trace_proxy_log10", "float",
               "probe: log10(||g||^2 + 1e-8), i.e. exactly 2 x `gradient_norm_log10` (checked on load); despite "
               "its name it is NOT a trace of the empirical neural tangent kernel and adds no information"),
        Column("initial_loss_log10", "float",
               "probe: log10(L0 + 1e-8), L0 = mean cross-entropy of the probe batch at initialisation "
               "(close to log10(ln num_classes))"),
        Column("epochs_to_converge", "int",
               "T_conv: epochs until validation-based early stopping (80/20 split) fired", min=1, target=True),
        Column("t80_close_epochs", "int", "T_80close = ceil(0.8 T_conv) (checked on load)", min=1,
               target_derived=True),
        Column("t90_close_epochs", "int", "T_90close = ceil(0.9 T_conv) (checked on load)", min=1,
               target_derived=True),
        Column("patience", "int", "early-stopping patience, epochs", min=1),
        Column("min_delta", "float", "early-stopping improvement threshold (validation loss)", min=0),
        Column("max_epochs", "int", "epoch cap of the run (`max_epochs`, or `max_epochs_used` in the Transformer "
               "file)", min=1),
        Column("seed", "int", "training seed (42 for every released run)", min=0),
        Column("source", "str", "raw file the row comes from, `<source>/<path>`"),
        Column("raw_row", "int", "1-based data row of the run in its raw file; rows keep the raw files' order "
               "(CNN, MLP, Transformer), on which the shuffled 5-fold split of the released code depends", min=1),
    ),
    extra_note=(
        "Dropped from the raw files: `param_count_log10`, `learning_rate_log10`, `batch_size_log10` "
        "(exact log10 of other columns, recomputed where a feature set needs them) and `architecture` "
        "(= `family`). Rows are in the order of the raw files (family, then `raw_row`). "
        "`t80_close_epochs` and `t90_close_epochs` are functions of the target: the released code "
        "excludes them from the features and so does every estimator here."),
)

# Raw column -> canonical column, per family (only renamed or kept columns are listed).
_COMMON = {
    "dataset": "dataset", "model": "model", "architecture": "family", "optimizer": "optimizer",
    "learning_rate": "learning_rate", "batch_size": "batch_size", "dataset_size": "dataset_size",
    "param_count": "param_count", "gradient_norm_log10": "gradient_norm_log10",
    "ntk_trace_proxy_log10": "ntk_trace_proxy_log10", "initial_loss_log10": "initial_loss_log10",
    "T_conv": "epochs_to_converge", "T_80close": "t80_close_epochs", "T_90close": "t90_close_epochs",
    "patience_P": "patience", "min_delta": "min_delta", "seed": "seed",
    "param_count_log10": None, "learning_rate_log10": None, "batch_size_log10": None,
}
_RAW_COLUMNS: dict[str, dict[str, str | None]] = {
    "CNN": {**_COMMON, "num_classes": "num_classes", "precision": "precision_bits", "max_epochs": "max_epochs"},
    "MLP": {**_COMMON, "num_classes": "num_classes", "precision": "precision_bits", "max_epochs": "max_epochs",
            **{c: c for c in _MLP_DIMS}},
    "Transformer": {**_COMMON, "task": "task", "max_epochs_used": "max_epochs"},
}
_LOG_CHECKS = {"param_count_log10": "param_count", "learning_rate_log10": "learning_rate",
               "batch_size_log10": "batch_size"}
_TOL = 1e-6


def _fail(path: str, col: str, mask: np.ndarray, what: str, values: pd.Series) -> None:
    if mask.any():
        i = int(np.flatnonzero(mask)[0])
        raise SchemaError(f"{path}: column '{col}' row {i + 2}: {values.iloc[i]!r} {what}")


def normalise_family(raw: pd.DataFrame, family: str, source: str) -> pd.DataFrame:
    """Canonical rows of one raw family CSV (not yet validated against :data:`CONVERGENCE`).

    ``raw``: the file as read; ``family``: one of :data:`FAMILIES`; ``source``: the file name
    used in messages and in the ``source`` column.
    """
    if family not in _RAW_COLUMNS:
        raise unknown_name("model family", family, FAMILIES)
    mapping = _RAW_COLUMNS[family]
    missing = [c for c in mapping if c not in raw.columns]
    if missing:
        raise SchemaError(f"{source}: missing required column(s) {', '.join(missing)} "
                          f"(expected the CHRONOS {family} convergence file)")
    if raw.empty:
        raise SchemaError(f"{source}: no rows")
    num = {}
    for col in ["T_conv", "T_80close", "T_90close", "gradient_norm_log10", "ntk_trace_proxy_log10",
                *_LOG_CHECKS, *_LOG_CHECKS.values()]:
        v = pd.to_numeric(raw[col], errors="coerce")
        _fail(source, col, (v.isna() & raw[col].notna()).to_numpy(), "is not a number", raw[col])
        _fail(source, col, v.isna().to_numpy(), "is missing", raw[col])
        num[col] = v.to_numpy(dtype=float)
    arch = raw["architecture"].astype(str)
    _fail(source, "architecture", (arch != family).to_numpy(), f"is not the family {family!r} of this file", arch)
    for derived, frac in (("T_80close", 0.8), ("T_90close", 0.9)):
        expected = np.array([math.ceil(round(frac * t, 9)) for t in num["T_conv"]])
        _fail(source, derived, num[derived] != expected, f"is not ceil({frac} T_conv)", raw[derived])
    _fail(source, "ntk_trace_proxy_log10",
          np.abs(num["ntk_trace_proxy_log10"] - 2 * num["gradient_norm_log10"]) > _TOL,
          "is not 2 x gradient_norm_log10", raw["ntk_trace_proxy_log10"])
    for logcol, col in _LOG_CHECKS.items():
        with np.errstate(divide="ignore", invalid="ignore"):
            bad = ~(np.abs(num[logcol] - np.log10(num[col])) <= _TOL)
        _fail(source, logcol, bad, f"is not log10({col})", raw[logcol])

    out = pd.DataFrame({new: raw[old] for old, new in mapping.items() if new is not None})
    out["source"] = source
    out["raw_row"] = np.arange(1, len(out) + 1)
    for col in CONVERGENCE.names:
        if col not in out.columns:
            out[col] = None
    return out[CONVERGENCE.names]


def normalise_convergence(raw_paths: Mapping[str, str | os.PathLike[str]],
                          source_prefix: str = "") -> pd.DataFrame:
    """Read the raw family CSVs and return the validated canonical ``convergence`` table.

    ``raw_paths`` maps a family (``CNN``, ``MLP``, ``Transformer``) to its raw CSV. The ``source``
    column records the path from ``source_prefix`` on (e.g. ``chronos/...``) when the path contains
    it, else the path as given. Rows keep the raw order (families in :data:`FAMILIES` order, then
    file order, recorded in ``raw_row``); exact duplicate rows are dropped first, as the released
    code does (``drop_duplicates``).
    """
    if not raw_paths:
        raise SchemaError("normalise_convergence: no raw files given")
    parts = []
    for family in sorted(raw_paths, key=lambda f: FAMILIES.index(f) if f in FAMILIES else 99):
        path = Path(raw_paths[family])
        text = str(path).replace(os.sep, "/")
        source = text[text.index(source_prefix):] if source_prefix and source_prefix in text else text
        raw = reject_duplicate_rows(read_csv(path), str(path))
        parts.append(normalise_family(raw, family, source))
    df = pd.concat(parts, ignore_index=True)
    return sort_raw_order(CONVERGENCE.validate(df, source="+".join(str(p) for p in raw_paths.values())))


def sort_raw_order(df: pd.DataFrame) -> pd.DataFrame:
    """Rows in the released files' order: family (:data:`FAMILIES` order), then ``raw_row``."""
    fam = df["family"].map({f: i for i, f in enumerate(FAMILIES)})
    order = np.lexsort((df["raw_row"].to_numpy(), fam.to_numpy()))
    return df.iloc[order].reset_index(drop=True)


def load_convergence(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read and validate a canonical ``convergence`` CSV (raises :class:`SchemaError` naming the column)."""
    return CONVERGENCE.validate(read_csv(path), source=str(path))


def write_convergence(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Validate ``df`` against :data:`CONVERGENCE` and write it atomically (byte-stable)."""
    df = sort_raw_order(CONVERGENCE.validate(df, source=str(path)))
    write_csv(df[CONVERGENCE.names], path)
