"""Load and validate the workflow configuration against ``schemas/config.schema.yaml``.

Validation happens once, when the Snakefile is parsed (and when a script runs by hand). The first
violation is reported as one line naming the key path, e.g.
``config: chronos.iteration.protocols[1]: 'lomo2' is not one of [...]``.
Defaults declared in the schema are filled in, so code can index the config without ``.get``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from traintime.core.errors import ConfigError


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _extend_with_default(validator_class: type) -> type:
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):  # type: ignore[no-untyped-def]
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_Filling = _extend_with_default(jsonschema.Draft202012Validator)


def load_schema(schema_path: str | Path) -> dict[str, Any]:
    with open(schema_path) as fh:
        return yaml.safe_load(fh)


def validate_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Fill schema defaults into ``config`` (in place) and raise :class:`ConfigError` on the first
    violation. Returns ``config``."""
    schema = load_schema(schema_path)
    validator = _Filling(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(list(e.absolute_path)), str(e.message)))
    if errors:
        err = errors[0]
        msg = err.message
        if err.validator == "additionalProperties":
            msg = msg.replace("Additional properties are not allowed", "unknown key(s)")
        raise ConfigError(f"config: {_path(err)}: {msg}")
    return config


def read_config_file(config_path: str | Path) -> dict[str, Any]:
    """One config file as Snakemake's ``--configfile`` loads it (JSON or YAML); missing, empty, bad
    YAML, duplicated keys or a non-mapping -> :class:`ConfigError`."""
    from traintime.core.config_checks import load_config_file

    return load_config_file(config_path)


def deep_update(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Merge ``update`` into ``base`` recursively (mappings merge, other values replace), as
    Snakemake merges ``--configfile`` files over the Snakefile's ``configfile``."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_update(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def merge_config_files(paths: list[str | Path]) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for p in paths:
        deep_update(config, read_config_file(p))
    return config


def load_config(config_path: str | Path, schema_path: str | Path) -> dict[str, Any]:
    return validate_config(read_config_file(config_path), schema_path)
