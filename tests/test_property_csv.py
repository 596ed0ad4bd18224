"""Property tests (hypothesis) of the CSV validators: a random value in any column of a valid row is
either refused with one message naming the column (exit 4) or accepted only if it is valid."""

from __future__ import annotations

import contextlib
import csv
import io
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from traintime.cli import main
from traintime.core.errors import SchemaError
from traintime.core.io import reject_duplicate_rows

CORPUS = Path(__file__).resolve().parent / "corpus"
HEADER, ROW = list(csv.reader(io.StringIO((CORPUS / "iteration_ok_rows.csv").read_text())))
NUMERIC_MIN = {"step_time_ms": 0.0, "batch_size": 1.0, "learning_rate": 0.0, "precision_bits": 1.0}

values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(2**80), max_value=2**80).map(str),
    st.sampled_from(["", "nan", "NaN", "inf", "-inf", "1e400", "-0", "TRUE", "maybe", "NULL", "N/A", "0x1F",
                     "1,5", "\"", "12.5ms", "\u00a0", "-1e-320"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=10),
)


def _validate(rows: list[list[str]], table: str = "iteration") -> tuple[int, list[str]]:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "t.csv"
        with open(f, "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows(rows)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["validate", table, str(f)])
    return code, err.getvalue().strip().splitlines()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=st.sampled_from(HEADER), value=values)
@example(column="learning_rate", value="TRUE")  # found by hypothesis: pandas reads TRUE as a boolean
def test_random_cell_is_refused_naming_the_column_or_is_valid(column: str, value: str) -> None:
    row = list(ROW)
    row[HEADER.index(column)] = value
    code, lines = _validate([HEADER, row])
    assert code in (0, 4), (code, lines)
    if code == 4:
        assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in lines[0]
        culprit = f"column '{column}'" in lines[0] or "column 'config_key'" in lines[0] \
            or "not a readable CSV" in lines[0] or f"column '{column}'" in lines[0].replace('"', "'")
        assert culprit or (column == "gpu" and "unknown GPU" in lines[0]), lines[0]
        return
    assert lines == []
    if column in NUMERIC_MIN:  # accepted: a finite number at or above the minimum
        x = float(value)
        assert math.isfinite(x) and x >= NUMERIC_MIN[column], value
        if column in ("batch_size", "precision_bits"):
            assert x == int(x)
    if column == "amp":
        assert value.strip().lower() in {"true", "1", "yes", "t", "y", "false", "0", "no", "f", "n"}


@settings(max_examples=50, deadline=None)
@given(n=st.integers(min_value=1, max_value=6), dup=st.data())
def test_any_exact_duplicate_row_is_refused(n: int, dup: st.DataObject) -> None:
    import pandas as pd

    df = pd.DataFrame({"a": range(n), "b": [f"x{i}" for i in range(n)]})
    i = dup.draw(st.integers(min_value=0, max_value=n - 1))
    doubled = pd.concat([df, df.iloc[[i]]], ignore_index=True)
    try:
        reject_duplicate_rows(doubled, "f.csv")
    except SchemaError as exc:
        assert f"duplicate of row {i + 2}" in str(exc)
    else:
        raise AssertionError("a doubled row was accepted")
    assert reject_duplicate_rows(df, "f.csv") is df
