"""A scoped memo for pure functions of a DataFrame, for nested cross-validation loops.

Nested selection fits one estimator per (candidate, inner fold) on the *same* fold slices; what an estimator derives
from the rows alone (workload descriptors, roofline terms, workload ids) is the same for every candidate. Inside
``with frame_memo():`` a function decorated with :func:`memoized_on_frame` computes it once per (function, frame
object, further arguments) and returns the stored value afterwards; outside, it simply calls the function. Frames are
keyed by identity and kept alive by the memo until the scope ends, so an id is never reused within it.

Callers must treat a memoized value as read-only (copy before changing it), and must not change a frame in place
while a scope that has seen it is active. :func:`memoized_on_frame` also serves the fold slices themselves
(:func:`traintime.chronos.efficiency_step.group_folds`), so every candidate of every choice sees the same objects.

:func:`memoized_on_arrays` keys by *content* instead: for a pure function of numpy arrays that candidates rebuild as
new objects with equal values (the standardised descriptors of the same fold rows, say), it computes once per
(function, arrays' shapes, dtypes and bytes) within the same scope.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

_MEMO: ContextVar[dict[tuple[Any, ...], tuple[Any, Any]] | None] = ContextVar("traintime_frame_memo", default=None)

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def frame_memo() -> Iterator[None]:
    """Activate the memo for the block (nested scopes share the outermost one); it is emptied at the end."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def _scoped(fn: F, key_of: Callable[[tuple[Any, ...]], Any]) -> F:
    """``fn`` memoized while :func:`frame_memo` is active, by ``key_of(args)``; the arguments are kept alive with the
    value, so an identity in a key is never reused within the scope."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        memo = _MEMO.get()
        if memo is None:
            return fn(*args)
        key = (fn.__module__, fn.__qualname__, key_of(args))
        hit = memo.get(key)
        if hit is not None:
            return hit[1]
        value = fn(*args)
        memo[key] = (args, value)
        return value

    return wrapper  # type: ignore[return-value]


def memoized_on_frame(fn: F) -> F:
    """Memoize ``fn(frame, *args)`` (hashable ``args``) by the identity of ``frame`` while :func:`frame_memo` is
    active."""
    return _scoped(fn, lambda args: (id(args[0]), args[1:]))


def _content_key(value: Any) -> Any:
    """A hashable stand-in for ``value``: numpy arrays by shape, dtype and a 128-bit digest of their bytes (SHA-256,
    truncated: twice as fast as BLAKE2b where the CPU hashes SHA-256 in hardware); other hashable values as they are;
    anything else (a DataFrame) by identity, as :func:`memoized_on_frame` keys frames."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return ("ndarray", data.shape, data.dtype.str, hashlib.sha256(data.data).digest()[:16])
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def memoized_on_arrays(fn: F) -> F:
    """Memoize ``fn(*args)`` by the content of its numpy-array arguments (hashable ones by value, others by identity,
    kept alive by the memo) while :func:`frame_memo` is active. Callers treat the returned value as read-only."""
    return _scoped(fn, lambda args: tuple(_content_key(a) for a in args))
