"""Small file helpers: atomic writes and typed table I/O shared by every stage."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from traintime.core.errors import SchemaError

_UMASK = os.umask(0)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` only on success.

    A reader never sees a half-written file and a crash leaves the old file (or none) in place.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, path)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str], float_format: str = "%.10g") -> None:
    """Write ``df`` atomically, without index, with a fixed float format (byte-stable)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format=float_format, lineterminator="\n")


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n", path)


def read_csv(path: str | os.PathLike[str], **kwargs: Any) -> pd.DataFrame:
    """Read a CSV, turning empty or unparsable files into one clear :class:`SchemaError`."""
    path = Path(path)
    if not path.exists():
        raise SchemaError(f"{path}: file not found")
    if path.stat().st_size == 0:
        raise SchemaError(f"{path}: file is empty")
    try:
        return pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SchemaError(f"{path}: not a readable CSV ({first})") from None


def to_markdown(df: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """Render a table as GitHub markdown without optional dependencies."""
    cols = [str(c) for c in df.columns]

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "" if pd.isna(v) else format(v, floatfmt)
        return "" if v is None else str(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_table(df: pd.DataFrame, csv_path: str | os.PathLike[str], md_path: str | os.PathLike[str] | None = None,
                title: str | None = None, note: str | None = None, floatfmt: str = ".2f") -> None:
    """Write a result table as CSV and (optionally) markdown with a title and a note."""
    write_csv(df, csv_path)
    if md_path is not None:
        parts = []
        if title:
            parts.append(f"# {title}\n")
        parts.append(to_markdown(df, floatfmt))
        if note:
            parts.append(f"\n{note.strip()}\n")
        write_text("\n".join(parts), md_path)


def reject_duplicate_rows(df: pd.DataFrame, source: str) -> pd.DataFrame:
    """Raise :class:`SchemaError` if two rows of ``df`` are identical in every column (a file with
    rows doubled by a bad copy or merge); returns ``df`` unchanged otherwise."""
    dup = df.duplicated(keep="first")
    if dup.any():
        row = int(dup.to_numpy().nonzero()[0][0])
        h = pd.util.hash_pandas_object(df, index=False).to_numpy()
        first = int((h == h[row]).nonzero()[0][0])
        raise SchemaError(f"{source}: row {row + 2} is an exact duplicate of row {first + 2} "
                          f"({int(dup.sum())} duplicated row(s); the file was copied or merged twice?)")
    return df
