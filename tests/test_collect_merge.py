"""Merging local rows: idempotent, deduplicated on the key, atomic."""

from __future__ import annotations

import os

import pandas as pd
import pytest

import traintime.core.io as tio
from traintime.core.errors import SchemaError
from traintime.measure.merge import merge_rows, provenance

KEY = ["model", "batch_size"]


def _rows(ms: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "a", "b"][: len(ms)], "batch_size": [32, 64, 32][: len(ms)],
                         "step_time_ms": ms})


def test_same_rows_twice_gives_no_duplicates(tmp_path) -> None:
    path = tmp_path / "local.csv"
    first = merge_rows(_rows([1.0, 2.0, 3.0]), path, KEY)
    text = path.read_bytes()
    second = merge_rows(_rows([1.0, 2.0, 3.0]), path, KEY)
    assert len(second) == 3 and path.read_bytes() == text
    pd.testing.assert_frame_equal(first, second)


def test_newer_row_replaces_older_and_new_keys_append(tmp_path) -> None:
    path = tmp_path / "local.csv"
    merge_rows(_rows([1.0, 2.0]), path, KEY)
    new = pd.DataFrame({"model": ["a", "c"], "batch_size": [64.0, 8], "step_time_ms": [9.0, 4.0],
                        "host": ["h", "h"]})
    out = merge_rows(new, path, KEY)
    assert list(zip(out["model"], out["batch_size"].astype(int), out["step_time_ms"])) == [
        ("a", 32, 1.0), ("a", 64, 9.0), ("c", 8, 4.0)]
    assert out["host"].isna().sum() == 1  # column missing on one side -> empty


def test_duplicates_inside_new_rows_keep_the_last(tmp_path) -> None:
    new = pd.DataFrame({"model": ["a", "a"], "batch_size": [32, 32], "step_time_ms": [1.0, 5.0]})
    out = merge_rows(new, tmp_path / "x.csv", KEY)
    assert out["step_time_ms"].tolist() == [5.0]


def test_failed_write_leaves_the_old_file(tmp_path, monkeypatch) -> None:
    path = tmp_path / "local.csv"
    merge_rows(_rows([1.0]), path, KEY)
    before = path.read_bytes()

    def boom(self, tmp, **kw):  # the temporary file is written, then the process "crashes"
        open(tmp, "w").write("partial")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", boom)
    with pytest.raises(OSError):
        merge_rows(_rows([7.0, 8.0]), path, KEY)
    assert path.read_bytes() == before
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp")] == []


def test_missing_key_column(tmp_path) -> None:
    with pytest.raises(SchemaError, match="batch_size"):
        merge_rows(pd.DataFrame({"model": ["a"]}), tmp_path / "x.csv", KEY)


def test_provenance_columns() -> None:
    p = provenance("cpu", {"torch_version": "x"})
    assert p["source"] == "local" and p["device"] == "cpu" and p["torch_version"] == "x" and p["host"]
    assert tio.write_csv  # the merge writes through traintime.core.io (atomic)
