"""``snakemake --config KEY=VALUE`` overrides, typed as the schema says before validation.

Snakemake parses a ``--config`` value with ``int``, ``float``, ``True``/``False`` and then YAML's
*BaseLoader*, which keeps every scalar a string: ``--config seeds=[42]`` arrives as ``['42']`` and
``--config 'emulation={host: {enabled: true}}'`` as ``{'host': {'enabled': 'true'}}``
(``snakemake.cli.parse_config``). The schema would reject both. :func:`coerce_cli_overrides`
re-reads every string leaf of the command-line overrides with YAML's safe loader, where the
schema at that key wants a non-string value; a string the schema accepts as it is (a GPU name such
as ``4090``) stays a string. Only the ``--config`` values are touched, never the config files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
import yaml

__all__ = ["coerce_cli_overrides", "coerce_value"]


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    """``node`` with its local ``$ref`` (``#/a/b``) replaced by the schema part it names."""
    if isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and node["$ref"].startswith("#/"):
        target: Any = root
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        return _resolve(target, root)
    return node


def _inline(node: Any, root: Mapping[str, Any], depth: int = 0) -> Any:
    """A copy of ``node`` with every local ``$ref`` inlined (the schema has no recursive refs)."""
    if depth > 50:
        return {}
    node = _resolve(node, root)
    if isinstance(node, Mapping):
        return {k: _inline(v, root, depth + 1) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, root, depth + 1) for v in node]
    return node


def _valid(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> bool:
    sub = _inline(schema, root)
    cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft7Validator)
    return cls(sub).is_valid(value)


def _child(schema: Mapping[str, Any], key: Any, root: Mapping[str, Any]) -> Mapping[str, Any]:
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping):
        return {}
    if isinstance(key, int):
        items = schema.get("items", {})
        return _resolve(items, root) if isinstance(items, Mapping) else {}
    props = schema.get("properties", {})
    if key in props:
        return _resolve(props[key], root)
    extra = schema.get("additionalProperties", {})
    return _resolve(extra, root) if isinstance(extra, Mapping) else {}


def coerce_value(value: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> Any:
    """``value`` (as Snakemake's ``--config`` parser returns it) typed for ``schema``.

    A string leaf becomes what YAML's safe loader reads from it (``'42'`` -> 42, ``'true'`` -> True,
    ``'null'`` -> None) unless that reading is invalid for the schema while the string itself is
    valid (then the string stays); a number that only the string type accepts becomes its string
    (Snakemake's own ``int`` parser turns a top-level ``name=4090`` into 4090). Mappings and lists are walked key by key with the matching
    sub-schema."""
    schema = _resolve(schema, root)
    if isinstance(value, Mapping):
        return {k: coerce_value(v, _child(schema, k, root), root) for k, v in value.items()}
    if isinstance(value, list):
        return [coerce_value(v, _child(schema, i, root), root) for i, v in enumerate(value)]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        # Snakemake's int/float parsers ran first: a top-level name=4090 is 4090, the schema may want '4090'
        if not _valid(value, schema, root) and _valid(str(value), schema, root):
            return str(value)
        return value
    if not isinstance(value, str):
        return value
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    if isinstance(parsed, str):
        try:  # PyYAML reads '1e-3' as a string (YAML 1.1); the schema may want the number
            number = float(value)
        except ValueError:
            return value
        ok = _valid(number, schema, root) and not _valid(value, schema, root)
        return number if ok else value
    if isinstance(parsed, (Mapping, list)):
        parsed = coerce_value(parsed, schema, root)
    if _valid(parsed, schema, root) or not _valid(value, schema, root):
        return parsed
    return value


def coerce_cli_overrides(config: dict[str, Any], overrides: Mapping[str, Any],
                         schema: Mapping[str, Any]) -> dict[str, Any]:
    """Replace, in the merged ``config``, every value that came from ``--config`` (``overrides``,
    Snakemake's ``workflow.config_settings.config``) by its schema-typed form (:func:`coerce_value`).
    Mappings merge as Snakemake merged them; other values replace. Returns ``config``."""

    def walk(cfg: dict[str, Any], over: Mapping[str, Any], sub: Mapping[str, Any]) -> None:
        for key, value in over.items():
            child = _child(sub, key, schema)
            if isinstance(value, Mapping) and isinstance(cfg.get(key), dict):
                walk(cfg[key], value, child)
            else:
                cfg[key] = coerce_value(value, child, schema)

    walk(config, dict(overrides), schema)
    return config
