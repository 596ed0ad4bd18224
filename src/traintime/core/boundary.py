"""The one error boundary of every entry point (``traintime`` CLI and every workflow script).

Expected failures become one line ``error: <message naming the culprit>`` on stderr and a documented
exit status; ``--debug`` (CLI) or ``TRAINTIME_DEBUG=1`` (CLI and workflow scripts) prints the
traceback as well. Exit statuses:

====  =======================================================================================
code  meaning (exception classes)
====  =======================================================================================
0     success
2     bad argument or unknown name: command-line usage, :class:`~traintime.core.errors.ArgumentError`,
      :class:`~traintime.core.errors.UnknownNameError`, any other
      :class:`~traintime.core.errors.TraintimeError`
3     invalid configuration: :class:`~traintime.core.errors.ConfigError`
4     invalid or corrupt data: :class:`~traintime.core.errors.SchemaError`,
      :class:`~traintime.core.errors.ChecksumError`, :class:`~traintime.core.errors.DataUnavailableError`,
      :class:`~traintime.core.errors.CorruptFileError` (truncated / random model file)
5     file system: missing file, directory where a file is expected (or the reverse), permission
      denied, read-only file system, disk full (``OSError`` and subclasses)
6     the run itself failed: :class:`~traintime.core.errors.TrainingError` (OOM, NaN loss),
      :class:`~traintime.core.errors.DeviceStateError`
70    internal error (a bug): any other exception; one line says so and how to see the traceback
130   interrupted (Ctrl-C)
====  =======================================================================================

Workflow scripts log the traceback of an internal error to the rule's log file in any case.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import TypeVar

from traintime.core.errors import (
    ArgumentError,
    ChecksumError,
    ConfigError,
    CorruptFileError,
    DataUnavailableError,
    DeviceStateError,
    SchemaError,
    TrainingError,
    TraintimeError,
    UnknownNameError,
)

log = logging.getLogger("traintime")

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_DATA = 4
EXIT_FILESYSTEM = 5
EXIT_RUN = 6
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

#: (exception classes, exit status), first match wins; the docstring table says the same.
EXIT_CODES: tuple[tuple[tuple[type[BaseException], ...], int], ...] = (
    ((ConfigError,), EXIT_CONFIG),
    ((SchemaError, ChecksumError, DataUnavailableError, CorruptFileError), EXIT_DATA),
    ((TrainingError, DeviceStateError), EXIT_RUN),
    ((ArgumentError, UnknownNameError, TraintimeError), EXIT_USAGE),
    ((OSError,), EXIT_FILESYSTEM),
    ((KeyboardInterrupt,), EXIT_INTERRUPTED),
)

DEBUG_ENV = "TRAINTIME_DEBUG"

T = TypeVar("T")


def debug_requested() -> bool:
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def exit_code(exc: BaseException) -> int:
    """The documented exit status of ``exc`` (70 for anything unexpected)."""
    for classes, code in EXIT_CODES:
        if isinstance(exc, classes):
            return code
    return EXIT_INTERNAL


def _os_message(exc: OSError) -> str:
    what = {
        errno.ENOENT: "no such file or directory",
        errno.EISDIR: "is a directory (a file is expected)",
        errno.ENOTDIR: "not a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "read-only file system",
        errno.ENOSPC: "no space left on device (disk full)",
        errno.EDQUOT: "disk quota exceeded",
        errno.EEXIST: "already exists",
    }.get(exc.errno or -1, exc.strerror or str(exc) or type(exc).__name__)
    culprit = exc.filename if exc.filename is not None else None
    if culprit is None:
        return f"{what} ({type(exc).__name__})"
    second = f" -> {exc.filename2}" if getattr(exc, "filename2", None) else ""
    return f"{culprit}{second}: {what}"


def error_message(exc: BaseException) -> str:
    """One line naming the culprit (no ``error:`` prefix)."""
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted"
    if isinstance(exc, TraintimeError):
        msg = str(exc)
    elif isinstance(exc, OSError):
        msg = _os_message(exc)
    else:
        msg = (f"internal error ({type(exc).__name__}: {exc}); this is a bug: rerun with --debug "
               f"(or {DEBUG_ENV}=1) for the traceback and report it")
    return " ".join(msg.split()) or type(exc).__name__


def report(exc: BaseException, debug: bool = False, stream=None) -> int:
    """Print ``error: ...`` (and the traceback if ``debug``) to ``stream``; return the exit status."""
    stream = sys.stderr if stream is None else stream
    if debug or debug_requested():
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=stream)
    print(f"error: {error_message(exc)}", file=stream)
    return exit_code(exc)


def guarded(fn: Callable[[], int | None], debug: bool = False) -> int:
    """Run ``fn()`` inside the boundary; return its status (``None`` -> 0) or the error's status."""
    try:
        out = fn()
        return EXIT_OK if out is None else int(out)
    except SystemExit:
        raise
    except BrokenPipeError:  # output piped into `head`: stop quietly
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 1
    except BaseException as exc:  # noqa: BLE001 - this is the boundary
        if exit_code(exc) == EXIT_INTERNAL:
            log.debug("internal error", exc_info=exc)
        return report(exc, debug=debug)
