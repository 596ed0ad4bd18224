"""configs/full.yaml (the documented expensive overlay) validates against the schema when merged over
config.yaml, as `snakemake --configfile configs/full.yaml` merges it, and does what it says."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from traintime.core.config import deep_update, read_config_file, validate_config
from traintime.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "schemas" / "config.schema.yaml"


def _merged(overlay: dict) -> dict:
    base = yaml.safe_load((REPO / "config.yaml").read_text())
    return validate_config(deep_update(base, copy.deepcopy(overlay)), SCHEMA)


def test_full_config_validates_and_is_more_than_the_default():
    full = _merged(read_config_file(REPO / "configs" / "full.yaml"))
    default = _merged({})
    assert len(full["seeds"]) == 5 and len(default["seeds"]) == 3
    fs, ds = full["chronos_iteration"]["selection"], default["chronos_iteration"]["selection"]
    assert fs["inner_max_folds"] > ds["inner_max_folds"]
    assert fs["inner_n_estimators_scale"] == 1.0 > ds["inner_n_estimators_scale"]
    # issue 14.4: the seed study is small in the default run and larger in the full config
    fss, dss = full["collect"]["convergence"]["seed_study"], default["collect"]["convergence"]["seed_study"]
    assert len(fss["seeds"]) > len(dss["seeds"]) >= 3 and len(fss["runs"]) > len(dss["runs"]) >= 3
    assert fss["patience"] == dss["patience"] and fss["max_epochs"] > dss["max_epochs"]
    # every grouped protocol runs every seed and the nested entry, in both
    for cfg in (full, default):
        for prot in ("lomo", "lodo", "logo"):
            ps = cfg["chronos_iteration"]["protocol_settings"][prot]
            assert ps["n_seeds"] is None or ps["n_seeds"] >= 3
            assert "nested" in ps["estimators"]


def test_a_broken_overlay_is_refused():
    bad = read_config_file(REPO / "configs" / "full.yaml")
    bad["chronos_iteration"]["selection"]["inner_n_estimators_scale"] = 0
    with pytest.raises(ConfigError, match="inner_n_estimators_scale"):
        _merged(bad)
