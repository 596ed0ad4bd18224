"""Validation of the parameters of :class:`traintime.predict.TrainingTimePredictor` where they enter.

Every check raises :class:`~traintime.core.errors.ArgumentError` naming the parameter (as the CLI
spells it) before any model is loaded or probed; :func:`training_range_notes` returns labelled
warnings for values outside the range the saved models were trained on (kept, not refused).
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from pathlib import Path
from typing import Any

from traintime.core.errors import ArgumentError, TraintimeError

#: Largest accepted batch sizes (beyond any GPU's memory for the supported models).
MAX_BATCH_SIZE = 1 << 20
MAX_PROBE_BATCH_SIZE = 4096
MAX_SEED = 2**32 - 1


def check_int(name: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in ``[lo, hi]`` (bools, floats with a fraction, NaN refused)."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, float, str)):
        raise ArgumentError(f"{name} {value!r} is not an integer")
    try:
        as_float = float(value)
        out = int(as_float) if math.isfinite(as_float) and as_float == int(as_float) else None
    except (TypeError, ValueError, OverflowError):
        out = None
    if out is None:
        raise ArgumentError(f"{name} {value!r} is not an integer")
    if isinstance(value, numbers.Integral):
        out = int(value)  # no float rounding of huge ints
    if not lo <= out <= hi:
        raise ArgumentError(f"{name} {out} is out of range [{lo}, {hi}]")
    return out


def check_float(name: str, value: Any, lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a finite float in the interval (inf / NaN refused)."""
    if isinstance(value, bool):
        raise ArgumentError(f"{name} {value!r} is not a number")
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ArgumentError(f"{name} {value!r} is not a number") from None
    if not math.isfinite(out):
        raise ArgumentError(f"{name} {value!r} is not a finite number")
    below = out <= lo if lo_open else out < lo
    above = out >= hi if hi_open else out > hi
    if below or above:
        raise ArgumentError(f"{name} {out:g} is out of range {'(' if lo_open else '['}{lo:g}, {hi:g}"
                            f"{')' if hi_open else ']'}")
    return out


def check_batch_size(batch_size: Any, train_size: int, dataset: str) -> int:
    """A batch of at least 1 and at most the training set (an epoch has at least one full step)."""
    b = check_int("--batch-size", batch_size, 1, MAX_BATCH_SIZE)
    if b > train_size:
        raise ArgumentError(f"--batch-size {b} exceeds the {train_size} training samples of {dataset} "
                            "(an epoch would be less than one step)")
    return b


def builder_keys(model: str) -> tuple[set[str], bool] | None:
    """Keyword arguments the registry builder of ``model`` accepts and whether it forwards others
    to a library (``None`` for timm / torchvision names: their constructors check)."""
    from traintime.measure.models import resolve_model

    r = resolve_model(model)
    if r.spec is None:
        return None
    sig = inspect.signature(r.spec.builder)
    named = {n for n, p in sig.parameters.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"num_classes", "img_px"}
    forwards = any(p.kind == p.VAR_KEYWORD and not n.startswith("_") for n, p in sig.parameters.items())
    return named, forwards


def check_model_kwargs(model: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Every ``--model-arg`` key must be a parameter of the model's builder (close matches offered)."""
    if not kwargs:
        return kwargs
    keys = builder_keys(model)
    if keys is None:
        return kwargs
    named, forwards = keys
    from traintime.measure.models import resolve_model

    sig = inspect.signature(resolve_model(model).spec.builder)  # type: ignore[union-attr]
    for key, value in kwargs.items():  # integer parameters (sizes, depths) must be positive integers
        p = sig.parameters.get(key)
        if p is not None and "int" in str(p.annotation) and "float" not in str(p.annotation):
            if value is None and "None" in str(p.annotation):
                continue
            check_int(f"--model-arg {key}", value, 1, 1 << 20)
    if forwards:
        return kwargs
    for key in kwargs:
        if key not in named:
            import difflib

            close = difflib.get_close_matches(key, sorted(named), n=3, cutoff=0.5)
            hint = f"; did you mean: {', '.join(close)}?" if close else ""
            accepted = ", ".join(sorted(named)) or "none"
            raise ArgumentError(f"--model-arg {key}: not a parameter of the {model!r} builder{hint} "
                                f"(accepted: {accepted})")
    return kwargs


def check_dir(name: str, path: str | os.PathLike[str]) -> Path:
    """An existing folder (a missing one would silently change what is reported)."""
    p = Path(path)
    if not p.exists():
        raise ArgumentError(f"{name} {p}: no such folder")
    if not p.is_dir():
        raise ArgumentError(f"{name} {p}: not a folder")
    return p


def check_output_file(name: str, path: str | os.PathLike[str]) -> Path:
    """A file that can be written: its folder exists and is writable, and it is not a folder."""
    p = Path(path)
    if p.is_dir():
        raise ArgumentError(f"{name} {p}: is a folder, expected a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ArgumentError(f"{name} {p}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise ArgumentError(f"{name} {p}: not writable (permission denied or read-only)")
    return p


def _range(path: Path, column: str, family: str) -> tuple[float, float] | None:
    if not path.is_file():
        return None
    from traintime.core.io import read_csv

    try:
        t = read_csv(path, usecols=["family", column])
    except (ValueError, TraintimeError):  # a missing column / unreadable file: no range to report
        return None
    v = t.loc[t["family"] == family, column].dropna()
    if v.empty:
        return None
    return float(v.min()), float(v.max())


def training_range_notes(data_dir: Path, family: str, batch_size: int, learning_rate: float) -> list[str]:
    """Labelled warnings for a batch size / learning rate outside the training data's range."""
    notes = []
    checks = (("batch size", batch_size, data_dir / "iteration.csv", "batch_size", "step-time"),
              ("learning rate", learning_rate, data_dir / "convergence.csv", "learning_rate", "convergence"))
    for label, value, path, column, model in checks:
        rng = _range(path, column, family)
        if rng is not None and not rng[0] <= value <= rng[1]:
            notes.append(f"warning: extrapolation: {label} {value:g} is outside the range the {model} model "
                         f"was trained on for {family} ({rng[0]:g}-{rng[1]:g}); treat the estimate with care")
    return notes
