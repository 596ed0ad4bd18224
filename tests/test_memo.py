"""The scoped memos: one computation per frame object (or per array content) inside a scope, none kept outside it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traintime.core.memo import frame_memo, memoized_on_arrays, memoized_on_frame

CALLS: list[int] = []


@memoized_on_frame
def _total(frame: pd.DataFrame, scale: float = 1.0) -> float:
    CALLS.append(id(frame))
    return float(frame["x"].sum() * scale)


def test_memo_computes_once_per_frame_and_arguments_inside_a_scope() -> None:
    CALLS.clear()
    a, b = pd.DataFrame({"x": [1.0, 2.0]}), pd.DataFrame({"x": [1.0, 2.0]})  # equal values, other object
    with frame_memo():
        assert _total(a) == _total(a) == 3.0
        assert _total(a, 2.0) == 6.0
        with frame_memo():  # a nested scope shares the outer one
            assert _total(b) == 3.0 and _total(a) == 3.0
    assert CALLS == [id(a), id(a), id(b)]
    _total(a), _total(a)  # outside a scope: no memo
    assert len(CALLS) == 5


ARRAY_CALLS: list[tuple[float, ...]] = []


@memoized_on_arrays
def _weighted(z: np.ndarray, frame: pd.DataFrame | None, k: int) -> float:
    ARRAY_CALLS.append(tuple(z.ravel()))
    return float(z.sum() * k + (0.0 if frame is None else frame["x"].sum()))


def test_array_memo_keys_arrays_by_content_and_frames_by_identity() -> None:
    ARRAY_CALLS.clear()
    z = np.arange(6.0).reshape(2, 3)
    f, g = pd.DataFrame({"x": [1.0]}), pd.DataFrame({"x": [1.0]})
    with frame_memo():
        assert _weighted(z, None, 2) == 30.0
        assert _weighted(z.copy(), None, 2) == 30.0  # equal values, new object: stored
        assert _weighted(np.asfortranarray(z), None, 2) == 30.0  # same values in another memory order: stored
        assert _weighted(z[:, :2].copy(), None, 2) == 16.0  # other shape: computed
        assert _weighted(z + 1e-12, None, 2) != 30.0  # other bytes: computed
        assert _weighted(z, None, 3) == 45.0  # other argument: computed
        assert _weighted(z, f, 2) == _weighted(z, f, 2) == 31.0
        assert _weighted(z, g, 2) == 31.0  # an equal frame that is another object: computed
    assert len(ARRAY_CALLS) == 6
    _weighted(z, None, 2)  # outside a scope: no memo
    assert len(ARRAY_CALLS) == 7


class _Forgetful(dict):
    """A memo that never stores anything (every call recomputes)."""

    def __setitem__(self, key, value) -> None:
        pass


class _ForgetfulVar:
    """Stands in for the memo's context variable: always an active, forgetful scope."""

    def get(self) -> _Forgetful:
        return _Forgetful()


def test_nested_selection_gives_the_same_choice_with_and_without_the_memo(monkeypatch) -> None:
    """The memo only saves work: the nested neighbour model's inner scores and predictions are the same when every
    memoized function recomputes on every call."""
    import traintime.core.memo as memo
    from traintime.chronos.neighbour_step import NestedNeighbourStepTime
    from tests.test_neighbour_step import GPUS, synthetic_rows, true_ms

    rows = synthetic_rows(list(range(6)), list(GPUS))
    y = true_ms(rows) * np.exp(np.random.default_rng(0).normal(0, 0.05, len(rows)))
    fast = NestedNeighbourStepTime().fit(rows, y)
    CALLS.clear()
    monkeypatch.setattr(memo, "_MEMO", _ForgetfulVar())
    with frame_memo():
        a = pd.DataFrame({"x": [1.0]})
        _total(a), _total(a)
    assert len(CALLS) == 2  # the stand-in really disables the memo
    slow = NestedNeighbourStepTime().fit(rows, y)
    assert fast.choice_ == slow.choice_
    assert fast.inner_mape_ == slow.inner_mape_ and fast.inner_trend_mape_ == slow.inner_trend_mape_
    np.testing.assert_allclose(fast.predict(rows), slow.predict(rows), rtol=1e-12)
