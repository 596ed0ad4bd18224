"""Load a saved model file (joblib) with one clear error for every way the file can be wrong."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from traintime.core.errors import CorruptFileError, TraintimeError


def load_joblib(path: str | os.PathLike[str], expected: type, what: str) -> Any:
    """``joblib.load(path)`` checked to be an instance of ``expected``.

    Missing -> :class:`TraintimeError` (run the workflow); a directory, a truncated, random or foreign
    file -> :class:`CorruptFileError` naming the file; permission problems stay ``OSError`` (the
    boundary names the file)."""
    import joblib

    p = Path(path)
    if not p.exists():
        raise TraintimeError(f"{p}: model file not found (run the workflow to train it)")
    if p.is_dir():
        raise CorruptFileError(f"{p}: is a directory, expected a saved {what} (.joblib file)")
    try:
        obj = joblib.load(p)
    except (PermissionError, IsADirectoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - unpickling random bytes can raise almost anything
        raise CorruptFileError(f"{p}: not a readable {what} file, truncated or corrupt "
                               f"({type(exc).__name__}); retrain it with the workflow") from None
    if not isinstance(obj, expected):
        raise CorruptFileError(f"{p}: holds a {type(obj).__name__}, not an {expected.__name__}")
    return obj
