"""User-facing errors.

Every error a user can cause (bad config, bad CSV, unknown name, checksum mismatch, no data, OOM,
NaN loss) is a :class:`TraintimeError`. Entry points (workflow scripts, CLI) go through
:mod:`traintime.core.boundary`, which prints one line and exits with a documented status per class.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class TraintimeError(Exception):
    """Base class of errors caused by input, not by a bug. The message names the culprit."""


class ConfigError(TraintimeError):
    """A configuration key or value is invalid."""


class SchemaError(TraintimeError):
    """A table does not match its schema (missing column, wrong type, bad value)."""


class ChecksumError(TraintimeError):
    """A retrieved file does not have the pinned sha256."""


class ArgumentError(TraintimeError):
    """A command-line argument or function parameter has a value outside its valid range."""


class CorruptFileError(TraintimeError):
    """A file exists but cannot be read as what it should be (truncated / random model file)."""


class DataUnavailableError(TraintimeError):
    """A file could be neither read from the mirror nor downloaded."""


class UnknownNameError(TraintimeError, KeyError):
    """An unknown model, dataset, GPU, estimator ... name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DeviceStateError(TraintimeError):
    """A GPU restriction could not be applied or is not permitted (e.g. no root for clocks)."""


class TrainingError(TraintimeError):
    """A measurement or training run failed in a way the user must know about (OOM, NaN loss)."""


def unknown_name(kind: str, name: str, known: Iterable[str]) -> UnknownNameError:
    """Build an :class:`UnknownNameError` listing close matches, timm-style.

    >>> str(unknown_name("GPU", "T5", ["T4", "L4"]))
    "unknown GPU 'T5'; did you mean: T4, L4? (known: L4, T4)"
    """
    known = sorted(set(known))
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean: {', '.join(close)}?" if close else ""
    shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
    return UnknownNameError(f"unknown {kind} {name!r}{hint} (known: {shown})")
