"""Normalisation of the CHRONOS convergence CSVs into the canonical `convergence` table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from traintime.core.errors import SchemaError
from traintime.data.chronos_convergence import (
    CONVERGENCE,
    FAMILIES,
    load_convergence,
    normalise_convergence,
    write_convergence,
)

RAW = "epoch_convergence_prediction/data/{}.csv"


def raw_cnn(n: int = 6) -> pd.DataFrame:
    """A small synthetic raw CNN file with the released columns (values made up)."""
    t = np.arange(10, 10 + n)
    g = np.linspace(-0.2, 0.3, n)
    return pd.DataFrame({
        "dataset": ["CIFAR10"] * n, "num_classes": 10, "dataset_size": 50000, "model": ["resnet50", "vgg16"] * (n // 2),
        "architecture": "CNN", "precision": 16, "optimizer": "SGD", "learning_rate": 0.001,
        "batch_size": [32 * (i + 1) for i in range(n)], "param_count": 1000,
        "param_count_log10": 3.0, "learning_rate_log10": -3.0,
        "batch_size_log10": np.log10([32 * (i + 1) for i in range(n)]),
        "gradient_norm_log10": g, "ntk_trace_proxy_log10": 2 * g, "initial_loss_log10": 0.36,
        "T_conv": t, "T_80close": [math.ceil(0.8 * x) for x in t], "T_90close": [math.ceil(0.9 * x) for x in t],
        "patience_P": 7, "min_delta": 5e-4, "max_epochs": 200, "seed": 42,
    })


def write_raw(tmp_path: Path, df: pd.DataFrame, family: str = "CNN") -> Path:
    p = tmp_path / f"{family}.csv"
    df.to_csv(p, index=False)
    return p


def test_schema_flags_target_and_target_derived():
    assert CONVERGENCE.targets == ["epochs_to_converge"]
    assert set(CONVERGENCE.target_derived) == {"t80_close_epochs", "t90_close_epochs"}
    md = CONVERGENCE.to_markdown()
    assert "never a feature" in md and "NOT a trace" in md


def test_normalise_synthetic_roundtrip(tmp_path):
    df = normalise_convergence({"CNN": write_raw(tmp_path, raw_cnn())})
    assert len(df) == 6
    assert list(df["raw_row"]) == [1, 2, 3, 4, 5, 6]
    assert df["epochs_to_converge"].tolist() == list(range(10, 16))
    assert df["t80_close_epochs"].tolist() == [8, 9, 10, 11, 12, 12]
    assert df["precision_bits"].tolist() == [16] * 6
    out = tmp_path / "conv.csv"
    write_convergence(df, out)
    back = load_convergence(out)
    pd.testing.assert_frame_equal(back, df, check_dtype=False)


@pytest.mark.parametrize("column", ["T_conv", "gradient_norm_log10", "model"])
def test_missing_column_is_named(tmp_path, column):
    with pytest.raises(SchemaError, match=column):
        normalise_convergence({"CNN": write_raw(tmp_path, raw_cnn().drop(columns=[column]))})


def test_t80_not_ceil_is_reported_with_row(tmp_path):
    raw = raw_cnn()
    raw.loc[2, "T_80close"] = 99
    with pytest.raises(SchemaError, match=r"'T_80close' row 4: .*ceil\(0.8 T_conv\)"):
        normalise_convergence({"CNN": write_raw(tmp_path, raw)})


def test_ntk_proxy_not_twice_gradient_norm(tmp_path):
    raw = raw_cnn()
    raw.loc[0, "ntk_trace_proxy_log10"] = 5.0
    with pytest.raises(SchemaError, match="ntk_trace_proxy_log10"):
        normalise_convergence({"CNN": write_raw(tmp_path, raw)})


def test_non_number_is_reported(tmp_path):
    raw = raw_cnn().astype({"gradient_norm_log10": object})
    raw.loc[1, "gradient_norm_log10"] = "abc"
    with pytest.raises(SchemaError, match=r"gradient_norm_log10' row 3: 'abc' is not a number"):
        normalise_convergence({"CNN": write_raw(tmp_path, raw)})


def test_wrong_family_file(tmp_path):
    with pytest.raises(SchemaError, match="architecture"):
        normalise_convergence({"MLP": write_raw(tmp_path, raw_cnn().assign(
            embed_dim=1, depth=1, patch_size=1, token_mlp_dim=1, channel_mlp_dim=1), "MLP")})


def test_load_broken_canonical_names_column(tmp_path):
    df = normalise_convergence({"CNN": write_raw(tmp_path, raw_cnn())})
    p = tmp_path / "conv.csv"
    write_convergence(df, p)
    text = p.read_text().splitlines()
    header = text[0].split(",")
    cells = text[2].split(",")
    cells[header.index("batch_size")] = "big"
    text[2] = ",".join(cells)
    p.write_text("\n".join(text) + "\n")
    with pytest.raises(SchemaError, match=r"column 'batch_size' row 3: 'big' is not a number"):
        load_convergence(p)


def test_released_files(mirror):
    paths = {f: mirror / "chronos" / RAW.format(f) for f in FAMILIES}
    df = normalise_convergence(paths, source_prefix="chronos/")
    assert len(df) == 324
    assert df["family"].value_counts().to_dict() == {"CNN": 144, "MLP": 108, "Transformer": 72}
    assert df["source"].iloc[0] == "chronos/" + RAW.format("CNN")
    assert df.loc[df["family"] == "Transformer", "num_classes"].isna().all()
    assert np.allclose(df["ntk_trace_proxy_log10"], 2 * df["gradient_norm_log10"], atol=1e-6)
    assert (df["t90_close_epochs"] == np.ceil(0.9 * df["epochs_to_converge"] - 1e-9)).all()
    assert df.loc[df["family"] == "MLP", "depth"].notna().all()
