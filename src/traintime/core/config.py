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


def load_schema(schema_path: str | Path) -> dict[str, Any]:
    with open(schema_path) as fh:
        return yaml.safe_load(fh)


def _one_line(error: jsonschema.ValidationError) -> str:
    msg = error.message
    if error.validator == "additionalProperties":
        msg = msg.replace("Additional properties are not allowed", "unknown key(s)")
    return f"config: {_path(error)}: {msg}"


def validate_config(config: dict[str, Any], schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` with Snakemake's own validator and fill the schema's defaults in place
    (``snakemake.utils.validate(config, schema, set_default=True)``, as the Snakefile does). The
    violation Snakemake reports is re-raised as one :class:`ConfigError` line naming the key path.
    Returns ``config``."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    try:
        validate(config, str(schema_path), set_default=True)
    except WorkflowError as exc:
        cause = exc.__cause__ or exc.__context__  # Snakemake raises it while handling the ValidationError
        if isinstance(cause, jsonschema.ValidationError):
            raise ConfigError(_one_line(cause)) from None
        raise ConfigError(f"config: {str(exc).splitlines()[0]}") from None
    return _resolve_links(config)


def _resolve_links(config: dict[str, Any]) -> dict[str, Any]:
    """Checks and defaults that tie keys together (a schema cannot express them): the saved convergence model
    (``chronos_convergence.final_method``) is one of the evaluated methods, whose out-of-fold predictions calibrate
    ``predict``'s epoch interval; the end-to-end table's epochs follow it unless set."""
    conv = config.get("chronos_convergence") or {}
    final, methods = conv.get("final_method"), conv.get("methods")
    if final is not None and methods is not None and final not in methods:
        raise ConfigError(f"config: chronos_convergence.final_method: {final!r} is not one of "
                          f"chronos_convergence.methods ({', '.join(map(str, methods))}); add it there")
    e2e = (config.get("chronos_iteration") or {}).get("end_to_end")
    if isinstance(e2e, dict) and e2e.get("convergence_method") is None and final is not None:
        e2e["convergence_method"] = final
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
