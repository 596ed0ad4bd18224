"""A scoped memo for pure functions of a DataFrame, for nested cross-validation loops.

Nested selection fits one estimator per (candidate, inner fold) on the *same* fold slices; what an estimator derives
from the rows alone (workload descriptors, roofline terms, workload ids) is the same for every candidate. Inside
``with frame_memo():`` a function decorated with :func:`memoized_on_frame` computes it once per (function, frame
object, further arguments) and returns the stored value afterwards; outside, it simply calls the function. Frames are
keyed by identity and kept alive by the memo until the scope ends, so an id is never reused within it.

Callers must treat a memoized value as read-only (copy before changing it), and must not change a frame in place
while a scope that has seen it is active. :func:`memoized_on_frame` also serves the fold slices themselves
(:func:`traintime.chronos.efficiency_step.group_folds`), so every candidate of every choice sees the same objects.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

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


def memoized_on_frame(fn: F) -> F:
    """Memoize ``fn(frame, *args)`` (hashable ``args``) by the identity of ``frame`` while :func:`frame_memo` is
    active."""

    @functools.wraps(fn)
    def wrapper(frame: Any, *args: Any) -> Any:
        memo = _MEMO.get()
        if memo is None:
            return fn(frame, *args)
        key = (fn.__module__, fn.__qualname__, id(frame), args)
        hit = memo.get(key)
        if hit is not None and hit[0] is frame:
            return hit[1]
        value = fn(frame, *args)
        memo[key] = (frame, value)
        return value

    return wrapper  # type: ignore[return-value]
