"""Defaults live in one place, the schema; config.yaml holds only the embedded default's overrides (17.5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from traintime.core.config import load_schema, merge_config_files, validate_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "schemas" / "config.schema.yaml"


def _resolve(node: Any, root: dict) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def same_as_default(cfg: dict, schema: dict, root: dict, path: str = "") -> list[str]:
    """Keys of ``cfg`` whose value equals the schema's default at that key (mappings are walked)."""
    out = []
    schema = _resolve(schema, root)
    for key, value in cfg.items():
        sub = _resolve(schema.get("properties", {}).get(key, {}), root)
        p = f"{path}.{key}" if path else key
        if isinstance(value, dict) and "properties" in sub:
            out += same_as_default(value, sub, root, p)
        elif "default" in sub and sub["default"] == value:
            out.append(p)
    return out


def test_config_yaml_holds_no_key_equal_to_its_schema_default():
    schema = load_schema(SCHEMA_PATH)
    cfg = yaml.safe_load((REPO / "config.yaml").read_text())
    assert same_as_default(cfg, schema, schema) == []


def test_the_check_sees_a_repeated_default():
    schema = load_schema(SCHEMA_PATH)
    cfg = {"seeds": [42, 0, 1], "collect": {"convergence": {"patience": 7, "max_epochs": 15}},
           "chronos_iteration": {"protocol_settings": {"lomo": {
               "estimators": ["xgboost", "replicate_median"]}}}}
    assert same_as_default(cfg, schema, schema) == [
        "seeds", "collect.convergence.patience", "chronos_iteration.protocol_settings.lomo.estimators"]


def test_the_embedded_default_is_the_schema_defaults_plus_the_overrides():
    """The 2-core sizing of the default run (values checked against the config before the move)."""
    cfg = validate_config(merge_config_files([REPO / "config.yaml"]), SCHEMA_PATH)
    assert cfg["seeds"] == [42, 0, 1]
    assert cfg["data"]["mirror"] == "../shared/data" and cfg["data"]["allow_download"] is True
    ps = cfg["chronos_iteration"]["protocol_settings"]
    assert ps["random"] == {"feature_sets": ["paper", "clean"], "n_seeds": None,
                            "estimators": ["xgboost", "random_forest", "mlp", "replicate_median"]}
    assert ps["logo"] == {"feature_sets": ["clean"], "estimators": ["xgboost", "replicate_median", "nested"],
                          "n_seeds": None}
    for p in ("lomo", "lodo"):
        assert ps[p] == {"feature_sets": ["clean"], "estimators": ["xgboost", "replicate_median", "nested"],
                         "n_seeds": None}
    conv = cfg["collect"]["convergence"]
    assert (conv["patience"], conv["max_epochs"], conv["min_delta"]) == (2, 15, 0.0005)
    assert conv["seed_study"]["seeds"] == [0, 1, 2] and conv["seed_study"]["patience"] == 3
    assert cfg["collect"]["probe"] == {"batch_sizes": [32, 64, 128], "repeats": 2, "ntk_method": "hutchinson",
                                       "ntk_projections": 2}


def test_check_config_still_validates_the_embedded_default(tmp_path, capsys):
    from traintime.cli import main

    f = tmp_path / "one.yaml"
    f.write_text("seeds: [42]\n")
    assert main(["check-config", str(f)]) == 0
