"""CHRONOS iteration-time data: normalisation of the released CSVs into the canonical table."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traintime.core.errors import SchemaError, UnknownNameError
from traintime.data.chronos import (
    FAMILIES,
    ITERATION,
    RAW_COLUMNS,
    family_columns,
    load_iteration,
    normalise_iteration,
    write_iteration,
)

REL = "chronos/epoch_time_prediction/data"

_STRINGS = {"dataset": "CIFAR100", "optimizer": "AdamW", "model": "ViT", "architecture": "Transformer",
            "arch_family": "encoder_only", "activation": "gelu", "norm_style": "preln", "norm_impl": "LayerNorm",
            "positional_encoding": "learned", "attention_pattern": "dense", "gpu_name": "Tesla T4",
            "Provisioning": "GCP", "Memory Type": "GDDR6", "Bus": "PCIe 3.0", "input_shape": "(3, 32, 32)"}


def fake_release_csv(path: Path, family: str = "Transformer", n: int = 3) -> Path:
    """A release-shaped CSV (the family's columns in release order) with n plausible rows."""
    rows = []
    for i in range(n):
        row = {}
        for raw, canon in RAW_COLUMNS[family]:
            if raw in _STRINGS:
                row[raw] = _STRINGS[raw] if raw != "architecture" else family
            elif raw in ("amp", "amp_enabled"):
                row[raw] = "TRUE" if i % 2 == 0 else "FALSE"
            elif raw == "precision":
                row[raw] = 16 if i % 2 == 0 else 32
            elif raw == "loader_ratio":
                row[raw] = 0.25
            elif raw in ("flops_1x1_frac", "flops_3x3_frac", "flops_depthwise_frac", "flops_grouped_frac"):
                row[raw] = 0.5
            elif raw == "learning_rate":
                row[raw] = [0.001, 0.002, 0.003][i % 3]
            else:
                row[raw] = 10 + i
        rows.append(row)
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _rewrite_cell(path: Path, column: str, row: int, value: str) -> None:
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.loc[row, column] = value
    df.to_csv(path, index=False)


def test_spreadsheet_artefacts_become_proper_numbers(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    _rewrite_cell(p, "flops_train_per_batch", 1, "1.06E+11")
    df = normalise_iteration({"Transformer": p})
    assert df["amp"].dtype == bool
    assert df["amp"].tolist() == [True, False, True]
    assert df.loc[1, "flops_train_per_batch"] == pytest.approx(1.06e11)
    assert df["spreadsheet_rounded"].tolist() == [False, True, False]
    assert df["gpu"].unique().tolist() == ["T4"]
    assert df["row_id"].tolist() == ["Transformer:00000", "Transformer:00001", "Transformer:00002"]
    # vision Transformer rows get the 224-px input of the release's collection script
    assert df["input_px"].tolist() == [224, 224, 224]


def test_bad_value_names_file_column_and_row(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    _rewrite_cell(p, "batch_size", 1, "eight")
    with pytest.raises(SchemaError) as exc:
        normalise_iteration({"Transformer": p})
    msg = str(exc.value)
    assert "Transformer.csv" in msg and "'batch_size'" in msg and "row 3" in msg and "'eight'" in msg


def test_bad_boolean_names_row(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    _rewrite_cell(p, "amp_enabled", 2, "maybe")
    with pytest.raises(SchemaError, match=r"'amp' row 4: 'maybe' is not a boolean"):
        normalise_iteration({"Transformer": p})


def test_missing_and_unexpected_columns(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    df = pd.read_csv(p)
    df.drop(columns=["loader_ratio"]).to_csv(p, index=False)
    with pytest.raises(SchemaError, match="missing column\\(s\\) loader_ratio"):
        normalise_iteration({"Transformer": p})
    df.assign(extra_col=1).to_csv(p, index=False)
    with pytest.raises(SchemaError, match="unexpected column\\(s\\) extra_col"):
        normalise_iteration({"Transformer": p})


def test_unknown_gpu_names_row_and_close_matches(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    _rewrite_cell(p, "gpu_name", 0, "Tesla T5")
    with pytest.raises(UnknownNameError) as exc:
        normalise_iteration({"Transformer": p})
    msg = str(exc.value)
    assert "'gpu_name' row 2" in msg and "unknown GPU 'Tesla T5'" in msg and "did you mean: Tesla T4" in msg


def test_family_mismatch_and_unknown_family(tmp_path):
    p = fake_release_csv(tmp_path / "Transformer.csv")
    _rewrite_cell(p, "architecture", 1, "MLP")
    with pytest.raises(SchemaError, match="'architecture' row 3: 'MLP' is not 'Transformer'"):
        normalise_iteration({"Transformer": p})
    with pytest.raises(UnknownNameError, match="unknown model family 'ViT'"):
        normalise_iteration({"ViT": p})


def test_schema_documents_target_and_leaky_columns():
    md = ITERATION.to_markdown()
    assert "`step_time_ms`" in md and "**target**" in md
    assert set(ITERATION.target_derived) == {"p90_step_time_ms", "loader_wait_ms", "compute_time_ms",
                                             "loader_ratio", "examples_per_sec"}
    for fam in FAMILIES:
        cols = family_columns(fam)
        assert all(c in ITERATION for c in cols), fam
        assert cols.index("step_time_ms") > cols.index("batch_size")


@pytest.fixture(scope="module")
def release_table(mirror):
    return normalise_iteration({f: mirror / REL / f"{f}.csv" for f in FAMILIES})


def test_release_normalises_to_10680_rows(release_table, tmp_path):
    df = release_table
    assert len(df) == 10680
    assert df.groupby("family").size().to_dict() == {"CNN": 3840, "MLP": 5760, "Transformer": 1080}
    # every configuration has exactly its three learning-rate replicates
    sizes = df.groupby("config_key").size()
    assert (sizes == 3).all() and len(sizes) == 3560
    assert (df.groupby("config_key")["learning_rate"].nunique() == 3).all()
    assert df.groupby("family")["gpu"].nunique().to_dict() == {"CNN": 10, "MLP": 10, "Transformer": 10}
    assert df["spreadsheet_rounded"].groupby(df["family"]).sum().to_dict() == {"CNN": 1560, "MLP": 3120,
                                                                              "Transformer": 960}
    assert (df["family"] + df["raw_row"].astype(str)).is_unique
    # loader_ratio is loader wait / target as shipped
    lr = df.dropna(subset=["loader_ratio"])
    assert np.allclose(lr["loader_ratio"], lr["loader_wait_ms"] / lr["step_time_ms"], rtol=1e-6)
    out = tmp_path / "iteration.csv"
    write_iteration(df, out)
    back = load_iteration(out)
    pd.testing.assert_frame_equal(back, df)
    first = out.read_bytes()
    write_iteration(back, out)
    assert out.read_bytes() == first
