"""Append local measurement rows to a meta-dataset file: atomic, deduplicated, idempotent.

:func:`merge_rows` reads the existing table (if any), appends the new rows, keeps one row per
configuration key (the *newest* row wins, so a re-measurement replaces the old one; merging the
same rows twice changes nothing), sorts by the key and writes the file through a temporary file
renamed onto the target (:func:`traintime.core.io.atomic_path`): a reader never sees a half-written
table and a crash leaves the previous file intact.

:func:`provenance` gives the columns every local row carries: ``source='local'``, ``host``,
``device`` and software versions. Timestamps (``measured_at``) belong to raw measurement rows only.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import SchemaError
from traintime.core.io import read_csv, write_csv
from traintime.core.schema import TableSchema


def provenance(device: str, versions: dict[str, Any] | None = None) -> dict[str, Any]:
    """Provenance columns of a local row: source, host, device and versions (python/torch/...)."""
    if versions is None:
        from traintime.measure.timing import software_versions

        versions = software_versions()
    return {"source": "local", "host": platform.node(), "device": device, **versions}


def merge_rows(new: pd.DataFrame, path: str | os.PathLike[str], key: Sequence[str],
               schema: TableSchema | None = None, sort_by: Sequence[str] | None = None,
               float_format: str | None = "%.10g") -> pd.DataFrame:
    """Merge ``new`` into the CSV at ``path`` (created if missing) and return the merged table.

    ``key``: columns identifying a configuration; rows of ``new`` replace existing rows with the
    same key, and duplicates inside ``new`` keep their last occurrence. ``schema``: validate the
    merged table before writing (SchemaError names the column and row). Columns missing on one
    side are filled with empty values. Rows are sorted by ``sort_by`` (default: ``key``).
    """
    key = list(key)
    missing = [k for k in key if k not in new.columns]
    if missing:
        raise SchemaError(f"rows to merge into {path} lack key column(s) {', '.join(missing)}")
    path = Path(path)
    parts = []
    if path.exists() and path.stat().st_size > 0:
        old = read_csv(path)
        bad = [k for k in key if k not in old.columns]
        if bad:
            raise SchemaError(f"{path}: existing table lacks key column(s) {', '.join(bad)}")
        parts.append(old)
    parts.append(new)
    cols = list(dict.fromkeys(c for p in parts for c in p.columns))
    merged = pd.concat([p.reindex(columns=cols) for p in parts], ignore_index=True)
    # normalise key values to strings for the comparison so 32 == 32.0 == "32" across reads
    norm = merged[key].apply(lambda s: s.map(_key_str))
    merged = merged.loc[~norm.duplicated(keep="last").to_numpy()]
    merged = merged.sort_values(list(sort_by or key), kind="mergesort").reset_index(drop=True)
    if schema is not None:
        merged = schema.validate(merged, source=str(path))
    write_csv(merged, path, float_format=float_format)  # type: ignore[arg-type]
    return merged


def _key_str(v: Any) -> str:
    if v is None or (isinstance(v, float) and pd.isna(v)):
        return ""
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, (int, float)):
        f = float(v)
        return repr(int(f)) if f.is_integer() else repr(f)
    return str(v)
