"""``snakemake --config`` overrides are typed as the schema says before validation (issue 17.5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from snakemake.cli import parse_config

from traintime.core.config import load_schema, merge_config_files, validate_config
from traintime.core.config_cli import coerce_cli_overrides
from traintime.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "schemas" / "config.schema.yaml"


def _effective(entries: list[str]) -> dict:
    """What common.smk validates: config.yaml merged with Snakemake's own parse of --config."""
    config = merge_config_files([REPO / "config.yaml"])
    overrides = parse_config(entries)  # exactly what Snakemake puts in workflow.config_settings.config
    from snakemake.utils import update_config

    update_config(config, overrides)
    coerce_cli_overrides(config, overrides, load_schema(SCHEMA_PATH))
    return validate_config(config, SCHEMA_PATH)


def test_snakemake_hands_config_values_over_as_strings():
    # the premise: without coercion the schema would see strings
    assert parse_config(["seeds=[42]"]) == {"seeds": ["42"]}
    assert parse_config(["emulation={host: {enabled: true}}"]) == {"emulation": {"host": {"enabled": "true"}}}


def test_readme_examples_validate_after_coercion():
    assert _effective(["seeds=[42]"])["seeds"] == [42]
    cfg = _effective(["emulation={host: {enabled: true}}"])
    assert cfg["emulation"]["host"]["enabled"] is True
    # the rest of emulation.host is still the default (mappings merge)
    assert cfg["emulation"]["host"] == {**validate_config(merge_config_files([REPO / "config.yaml"]), SCHEMA_PATH)
                                       ["emulation"]["host"], "enabled": True}


def test_without_coercion_the_schema_rejects_them():
    config = merge_config_files([REPO / "config.yaml"])
    config["seeds"] = parse_config(["seeds=[42]"])["seeds"]
    with pytest.raises(ConfigError, match=r"seeds\[0\]: '42' is not of type 'integer'"):
        validate_config(config, SCHEMA_PATH)


def test_strings_the_schema_wants_stay_strings_and_null_is_null():
    schema = {"type": "object", "properties": {
        "name": {"type": ["string", "null"]}, "n": {"type": "integer"}, "x": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}}}}
    over = parse_config(["name=4090", "tags=[1, true]"])
    assert coerce_cli_overrides({}, over, schema) == {"name": "4090", "tags": ["1", "true"]}
    assert coerce_cli_overrides({}, parse_config(["name=null"]), schema) == {"name": None}
    assert coerce_cli_overrides({}, {"n": "7", "x": "1e-3"}, schema) == {"n": 7, "x": 1e-3}


def test_bad_value_still_fails_with_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"config: emulation\.host\.enabled: 'maybe' is not of type 'boolean'"):
        _effective(["emulation={host: {enabled: maybe}}"])


def test_config_files_are_not_coerced():
    # only --config values are re-read; a quoted '3' in a config file stays an error
    config = {"seeds": ["3"]}
    coerce_cli_overrides(config, {}, load_schema(SCHEMA_PATH))
    assert config == {"seeds": ["3"]}
