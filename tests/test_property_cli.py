"""Property tests (hypothesis) of the ``traintime predict`` argument parser and checks: random values
never produce a traceback or an internal error, and a value is accepted only if it is in range."""

from __future__ import annotations

import contextlib
import io
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traintime.cli import main

BASE = ["predict", "--model", "mixer", "--dataset", "digits", "--models-dir", "/nonexistent-models"]
ACCEPTED = "--models-dir /nonexistent-models: no such folder"  # every argument passed; the models are next

text_values = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "Infinity", "1e3", "0x10", "", " ", "--", "1_000", "٣"]),
    st.text(max_size=12),
)


def _run(argv: list[str]) -> tuple[int, list[str]]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    return code, err.getvalue().strip().splitlines()


def _check_one_line(code: int, lines: list[str]) -> str:
    assert code == 2, (code, lines)
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert "Traceback" not in lines[0] and "internal error" not in lines[0]
    return lines[0]


def _as_float(s: str) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(["--batch-size", "--probe-batch-size", "--top", "--precision"]), value=text_values)
def test_integer_options(option: str, value: str) -> None:
    line = _check_one_line(*_run([*BASE, f"{option}={value}"]))
    if ACCEPTED in line:  # accepted: must be a sensible integer
        n = int(value)
        ranges = {"--batch-size": (1, 1797), "--probe-batch-size": (1, 4096), "--top": (0, 2**31),
                  "--precision": (16, 32)}
        lo, hi = ranges[option]
        assert lo <= n <= hi, (option, value)
        if option == "--precision":
            assert n in (16, 32)
    else:
        assert option in line or "precision" in line, line  # the culprit is named


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(option=st.sampled_from(["--learning-rate", "--coverage"]), value=text_values)
def test_float_options(option: str, value: str) -> None:
    line = _check_one_line(*_run([*BASE, f"{option}={value}"]))
    if ACCEPTED in line:
        x = float(value)
        assert math.isfinite(x) and x > 0
        assert x <= 100 if option == "--learning-rate" else x < 1
    else:
        assert option in line, line


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.text(min_size=0, max_size=10), value=text_values)
def test_model_args(key: str, value: str) -> None:
    line = _check_one_line(*_run([*BASE, "--model-arg", f"{key}={value}"]))
    if ACCEPTED in line:
        assert key in ("embed_dim", "depth", "patch_size")
        f = _as_float(value)
        assert f is None or math.isfinite(f)
    else:
        assert "--model-arg" in line, line
