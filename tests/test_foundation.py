"""Foundation: config validation, retrieval with checksums and mirror, schemas, specs, io, metrics."""

from __future__ import annotations

import copy
import hashlib
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from traintime.core import metrics
from traintime.core.config import load_config, validate_config
from traintime.core.errors import (
    ChecksumError,
    ConfigError,
    DataUnavailableError,
    SchemaError,
    UnknownNameError,
    unknown_name,
)
from traintime.core.io import read_csv, write_csv, write_table
from traintime.core.schema import Column, TableSchema
from traintime.core.specs import canonical_gpu, load_specs
from traintime.data.retrieve import Source, resolve_mirror, retrieve, sha256_of

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


@pytest.fixture()
def config() -> dict:
    return yaml.safe_load((REPO / "config.yaml").read_text())


# --- config ---------------------------------------------------------------------------------

def test_default_config_is_valid(config):
    validate_config(config, SCHEMA)


def test_unknown_top_level_key_is_named(config):
    config["sedes"] = [1]
    with pytest.raises(ConfigError, match=r"config: \(top level\): unknown key.*'sedes'"):
        validate_config(config, SCHEMA)


def test_bad_value_names_the_key_path(config):
    config["seeds"] = [42, "x"]
    with pytest.raises(ConfigError, match=r"config: seeds\[1\]: 'x' is not of type 'integer'"):
        validate_config(config, SCHEMA)


def test_bad_checksum_in_config_is_rejected(config):
    files = config["data"]["sources"]["chronos"]["files"]
    files[next(iter(files))] = "nothex"
    with pytest.raises(ConfigError, match=r"data\.sources\.chronos\.files\."):
        validate_config(config, SCHEMA)


def test_defaults_are_filled(config):
    # config.yaml holds only overrides: allow_download comes from the schema's default
    assert "allow_download" not in config["data"]
    out = validate_config(copy.deepcopy(config), SCHEMA)
    assert out["data"]["allow_download"] is True
    assert out["emulation"]["host"]["backend"] == "auto"


def test_load_config_reports_yaml_errors(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("seeds: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, SCHEMA)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml", SCHEMA)


# --- retrieval -------------------------------------------------------------------------------

def _source(tmp_path: Path, content: bytes, pinned: str | None = None) -> tuple[Source, Path]:
    mirror = tmp_path / "mirror"
    f = mirror / "src" / "dir" / "a.csv"
    f.parent.mkdir(parents=True)
    f.write_bytes(content)
    digest = pinned or hashlib.sha256(content).hexdigest()
    src = Source("src", "http://127.0.0.1:9/{path}", {"dir/a.csv": digest})
    return src, mirror


def test_retrieve_from_mirror_verifies_and_copies(tmp_path):
    src, mirror = _source(tmp_path, b"a,b\n1,2\n")
    dest = tmp_path / "out" / "a.csv"
    origin = retrieve(src, "dir/a.csv", dest, mirror, allow_download=False)
    assert dest.read_bytes() == b"a,b\n1,2\n"
    assert origin.endswith("src/dir/a.csv")
    assert sha256_of(dest) == src.files["dir/a.csv"]


def test_checksum_mismatch_writes_nothing(tmp_path):
    src, mirror = _source(tmp_path, b"a,b\n1,2\n", pinned="0" * 64)
    dest = tmp_path / "out" / "a.csv"
    with pytest.raises(ChecksumError, match="checksum mismatch for .*a.csv: sha256 [0-9a-f]{64}, expected 0{64}"):
        retrieve(src, "dir/a.csv", dest, mirror, allow_download=False)
    assert not dest.exists()
    assert list(dest.parent.glob("*")) == []


def test_no_mirror_no_network_is_one_clear_message(tmp_path):
    src, _ = _source(tmp_path, b"x")
    dest = tmp_path / "out" / "a.csv"
    with pytest.raises(DataUnavailableError, match=r"cannot get src/dir/a.csv: mirror .* \(absent\); download "):
        retrieve(src, "dir/a.csv", dest, tmp_path / "empty", timeout_s=2)
    assert not dest.exists()


def test_unpinned_path_is_a_config_error(tmp_path):
    src, mirror = _source(tmp_path, b"x")
    with pytest.raises(ConfigError, match="no sha256 pinned for 'other.csv'"):
        retrieve(src, "other.csv", tmp_path / "o.csv", mirror)


def test_mirror_env_var_overrides_config(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINTIME_DATA_MIRROR", str(tmp_path))
    assert resolve_mirror("elsewhere") == tmp_path
    monkeypatch.delenv("TRAINTIME_DATA_MIRROR")
    assert resolve_mirror("elsewhere") == Path("elsewhere")
    assert resolve_mirror(None) is None


def test_pinned_checksums_match_the_mirror(mirror, config):
    """The sha256 pinned in config.yaml are those of the offline mirror's files."""
    checked = 0
    for name, cfg in config["data"]["sources"].items():
        for path, digest in cfg["files"].items():
            f = mirror / name / path
            if f.exists():
                assert sha256_of(f) == digest, f
                checked += 1
    assert checked >= 6 + 19


# --- schema / io -----------------------------------------------------------------------------

SCH = TableSchema("t", "test table", key=("k",), columns=(
    Column("k", "str"), Column("x_ms", "float", min=0), Column("ok", "bool"),
    Column("n", "int", nullable=True), Column("kind", "str", allowed=("a", "b")),
))


def _df(**over):
    d = {"k": ["r1", "r2"], "x_ms": ["1.06E+11", "2"], "ok": ["TRUE", "false"], "n": [1, None],
         "kind": ["a", "b"]}
    d.update(over)
    return pd.DataFrame(d)


def test_schema_coerces_spreadsheet_artefacts():
    out = SCH.validate(_df())
    assert out["x_ms"].tolist() == [1.06e11, 2.0]
    assert out["ok"].tolist() == [True, False]
    assert out["ok"].dtype == bool


@pytest.mark.parametrize("over,msg", [
    ({"x_ms": ["1", "abc"]}, r"column 'x_ms' row 3: 'abc' is not a number"),
    ({"x_ms": ["1", "-5"]}, r"column 'x_ms' row 3: -5.0 is below the minimum 0"),
    ({"ok": ["TRUE", "maybe"]}, r"column 'ok' row 3: 'maybe' is not a boolean"),
    ({"kind": ["a", "z"]}, r"column 'kind' row 3: 'z' is not one of a, b"),
    ({"k": ["r1", "r1"]}, r"duplicated key \(k='r1'\) at row 2"),
    ({"x_ms": ["1", None]}, r"column 'x_ms' row 3: missing value"),
    ({"n": [1.5, 2]}, r"column 'n' row 2: 1.5 is not an integer"),
    ({"x_ms": [True, False]}, r"column 'x_ms' row 2: True is not a number"),  # a column pandas read as booleans
    ({"x_ms": [1.0, True]}, r"column 'x_ms' row 3: True is not a number"),  # one boolean cell among numbers
])
def test_schema_errors_name_column_and_row(over, msg):
    with pytest.raises(SchemaError, match=msg):
        SCH.validate(_df(**over), source="f.csv")


def test_schema_missing_column_and_empty():
    with pytest.raises(SchemaError, match=r"f.csv: table 't': missing required column\(s\) kind"):
        SCH.validate(_df().drop(columns="kind"), source="f.csv")
    with pytest.raises(SchemaError, match="no rows"):
        SCH.validate(_df().iloc[:0])


def test_read_csv_empty_and_garbage(tmp_path):
    (tmp_path / "e.csv").write_text("")
    with pytest.raises(SchemaError, match="e.csv: file is empty"):
        read_csv(tmp_path / "e.csv")
    with pytest.raises(SchemaError, match="file not found"):
        read_csv(tmp_path / "none.csv")


def test_write_csv_is_atomic_and_byte_stable(tmp_path):
    df = pd.DataFrame({"a": [1.0 / 3, 2.0], "b": ["x", "y"]})
    p = tmp_path / "t.csv"
    write_csv(df, p)
    first = p.read_bytes()
    write_csv(df, p)
    assert p.read_bytes() == first
    assert [f.name for f in tmp_path.iterdir()] == ["t.csv"]
    write_table(df, tmp_path / "t2.csv", tmp_path / "t2.md", title="T")
    assert (tmp_path / "t2.md").read_text().startswith("# T\n\n| a | b |")


# --- specs / names ---------------------------------------------------------------------------

def test_gpu_aliases_resolve():
    assert canonical_gpu("Tesla T4") == "T4"
    assert canonical_gpu("NVIDIA_GeForce_RTX_5090") == "RTX-5090"
    assert canonical_gpu("tesla p100-pcie-16gb") == "P100-PCIe-16GB"


def test_unknown_gpu_lists_close_matches():
    with pytest.raises(UnknownNameError, match=r"unknown GPU 'T44'; did you mean: T4"):
        canonical_gpu("T44")
    assert "did you mean" not in str(unknown_name("model", "zzzz", ["resnet50"]))


def test_spec_table_is_valid_and_has_chronos_gpus():
    specs = load_specs()
    for name in ["NVIDIA A40", "NVIDIA A100 80GB PCIe", "NVIDIA GeForce RTX 5090", "NVIDIA H100 PCIe",
                 "NVIDIA L4", "NVIDIA L40S", "Tesla P4", "Tesla P100-PCIE-16GB", "Tesla T4",
                 "Tesla V100-SXM2-16GB"]:
        canonical_gpu(name, specs)
    assert specs["price_per_hour_usd"].notna().sum() >= 10


def test_spec_table_alias_clash_is_reported(tmp_path):
    specs = load_specs()
    bad = specs.copy()
    bad.loc[bad["gpu"] == "L4", "aliases"] = "Tesla T4"
    p = tmp_path / "s.csv"
    bad.to_csv(p, index=False)
    with pytest.raises(SchemaError, match="alias 'Tesla T4' names both"):
        load_specs(p)


# --- metrics (hand-computed) -----------------------------------------------------------------

def test_metrics_against_hand_computed_values():
    t = [100.0, 200.0, 50.0]
    p = [110.0, 150.0, 50.0]
    # APE = 10, 25, 0
    assert metrics.mape(t, p) == pytest.approx(35 / 3)
    assert metrics.median_ape(t, p) == pytest.approx(10.0)
    assert metrics.rmse(t, p) == pytest.approx(math.sqrt((100 + 2500 + 0) / 3))
    assert metrics.mae(t, p) == pytest.approx(20.0)
    assert metrics.share_within(t, p, 10) == pytest.approx(2 / 3)
    assert metrics.spearman([1, 2, 3], [10, 30, 20]) == pytest.approx(0.5)
    assert metrics.pearson_log([1, 10, 100], [2, 20, 200]) == pytest.approx(1.0)
    assert metrics.abs_log_ratio([2.0], [1.0])[0] == pytest.approx(math.log(2))
    err = metrics.step_errors(t, p)
    assert err["mape_pct"] == pytest.approx(35 / 3) and err["median_ape_pct"] == pytest.approx(10.0)
    assert err["geo_mean_pred_over_measured"] == pytest.approx((1.1 * 0.75 * 1.0) ** (1 / 3))
    assert all(math.isnan(v) for v in metrics.step_errors([], []).values())
    m, s = metrics.mean_sd([1.0, 2.0, 3.0])
    assert (m, s) == (pytest.approx(2.0), pytest.approx(1.0))
    m1, s1 = metrics.mean_sd([5.0])
    assert m1 == 5.0 and math.isnan(s1)  # one value: no spread was measured
    assert metrics.fmt_mean_sd(5.0, s1) == "5.00"
    with pytest.raises(ValueError):
        metrics.mape([0.0], [1.0])


def test_aggregate_seeds():
    df = pd.DataFrame({"model": ["a", "a", "b"], "seed": [0, 1, 0], "mape": [10.0, 20.0, 5.0]})
    out = metrics.aggregate_seeds(df, ["model"], ["mape"])
    a = out.set_index("model").loc["a"]
    assert a["mape_mean"] == 15.0 and a["mape_sd"] == pytest.approx(np.std([10, 20], ddof=1))
    assert int(out.set_index("model").loc["b", "n_seeds"]) == 1
    assert metrics.fmt_mean_sd(12.345, 0.5) == "12.35 +- 0.50"
