"""What the JSON schema cannot say about a config: how the files load, strict integers, cross-references.

* :func:`load_config_file` reads a file with Snakemake's own loader (JSON or YAML; an empty file or
  a non-mapping is refused, as ``snakemake --configfile`` refuses it) and also refuses duplicated keys
  (which YAML would silently resolve to the last one).
* :func:`check_strict_integers` refuses ``42.0`` where the schema says ``integer`` (JSON Schema
  counts 42.0 as an integer; Python code indexing with it would not).
* :func:`check_cross_references` resolves every GPU name against the spec table and, with
  ``names=True``, every model / dataset / optimizer name against the model and dataset tables
  (that import torch, so the Snakefile checks GPU names only and ``traintime check-config`` all).

Every failure is one :class:`~traintime.core.errors.ConfigError` naming the file or key path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from traintime.core.errors import ConfigError, TraintimeError

#: Config keys naming GPUs of the spec table (``[]``: a list of names).
GPU_KEYS: tuple[str, ...] = ("example.gpus[]", "emulation.reference_host", "emulation.figures.bar_targets[]",
                             "emulation.figures.landscape_targets[]", "emulation.host.host_gpu",
                             "emulation.host.targets[]", "collect.expected_gpu")
MODEL_KEYS: tuple[str, ...] = ("example.model", "emulation.figures.bar_models[]",
                               "emulation.figures.landscape_models[]", "emulation.host.models[]",
                               "collect.benchmark.models[]", "collect.convergence.runs[].model")
DATASET_KEYS: tuple[str, ...] = ("example.dataset", "collect.benchmark.datasets[]",
                                 "collect.convergence.runs[].dataset")
OPTIMIZER_KEYS: tuple[str, ...] = ("example.optimizer", "collect.benchmark.optimizers[]",
                                   "collect.convergence.runs[].optimizer")


class _NoDuplicatesLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping with the same key twice."""


def _construct_mapping(loader: _NoDuplicatesLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            continue  # SafeLoader reports unhashable keys itself
        if key in seen:
            raise ConfigError(f"duplicated key {key!r} at line {key_node.start_mark.line + 1} "
                              f"(first at line {seen[key] + 1})")
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_NoDuplicatesLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def check_no_duplicate_keys(path: str | Path) -> None:
    """Refuse a YAML/JSON file with a duplicated key (ConfigError naming the file and line)."""
    p = Path(path)
    try:
        yaml.load(p.read_text(encoding="utf-8"), Loader=_NoDuplicatesLoader)  # noqa: S506 - safe loader
    except ConfigError as exc:
        raise ConfigError(f"{p}: {exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError):
        pass  # syntax errors are the loader's to report


def load_config_file(path: str | Path) -> dict[str, Any]:
    """One config file as Snakemake's ``--configfile`` loads it, duplicates refused."""
    from snakemake.common.configfile import load_configfile
    from snakemake.exceptions import WorkflowError

    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"{p}: is a folder, expected a YAML config file")
    if not p.is_file():
        raise ConfigError(f"config file not found: {p}")
    if not p.read_bytes().strip():
        raise ConfigError(f"{p}: file is empty (Snakemake refuses an empty config file)")
    try:
        config = load_configfile(str(p))
    except WorkflowError as exc:
        first = " ".join(str(exc).split())
        if "keys at top level" in first:
            raise ConfigError(f"{p}: top level must be a mapping") from None
        raise ConfigError(f"{p}: not valid YAML ({first})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{p}: not valid YAML ({type(exc).__name__}: {' '.join(str(exc).split())})") from None
    check_no_duplicate_keys(p)
    return dict(config)


def _strict_int_errors(value: Any, schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, dict):
        return
    types = schema.get("type")
    types = [types] if isinstance(types, str) else (types or [])
    if "integer" in types and "number" not in types and isinstance(value, float):
        yield f"config: {path}: {value!r} is not an integer (write it without a decimal point)"
    if isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for k, v in value.items():
            sub = props.get(k, extra if isinstance(extra, dict) else None)
            yield from _strict_int_errors(v, sub, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            yield from _strict_int_errors(v, schema["items"], f"{path}[{i}]")
    for comb in ("anyOf", "oneOf"):
        for sub in schema.get(comb, []):  # the first branch that declares a type decides
            if isinstance(sub, dict) and "type" in sub:
                yield from _strict_int_errors(value, {"type": sub["type"]}, path)
                break


def check_strict_integers(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Refuse a float (``42.0``) where the schema declares an integer."""
    for err in _strict_int_errors(config, schema, ""):
        raise ConfigError(err)


def _values(config: Any, key: str) -> Iterator[tuple[str, Any]]:
    """(key path, value) pairs of a dotted key; ``name[]`` iterates a list."""
    parts = key.split(".")

    def walk(node: Any, i: int, path: str) -> Iterator[tuple[str, Any]]:
        if i == len(parts):
            if node is not None:
                yield path, node
            return
        part = parts[i]
        is_list = part.endswith("[]")
        name = part[:-2] if is_list else part
        if not isinstance(node, dict) or node.get(name) is None:
            return
        child, cpath = node[name], f"{path}.{name}" if path else name
        if is_list:
            for j, item in enumerate(child if isinstance(child, list) else []):
                yield from walk(item, i + 1, f"{cpath}[{j}]")
        else:
            yield from walk(child, i + 1, cpath)

    yield from walk(config, 0, "")


def check_cross_references(config: dict[str, Any], names: bool = True) -> None:
    """Every GPU name must resolve in the spec table (``gpu_specs`` or the packaged one); with
    ``names``, every model, dataset and optimizer name in the model / dataset tables."""
    from traintime.core.specs import canonical_gpu, load_specs

    try:
        specs = load_specs(config.get("gpu_specs"))
    except TraintimeError as exc:
        raise ConfigError(f"config: gpu_specs: {exc}") from None
    checks: list[tuple[tuple[str, ...], Any]] = [(GPU_KEYS, lambda n: canonical_gpu(str(n), specs))]
    if names:
        from traintime.measure.datasets import dataset_info
        from traintime.measure.models import resolve_model
        from traintime.measure.timing import optimizer_label

        checks += [(MODEL_KEYS, lambda n: resolve_model(str(n))), (DATASET_KEYS, lambda n: dataset_info(str(n))),
                   (OPTIMIZER_KEYS, lambda n: optimizer_label(str(n)))]
    for keys, resolve in checks:
        for key in keys:
            for path, value in _values(config, key):
                try:
                    resolve(value)
                except TraintimeError as exc:
                    raise ConfigError(f"config: {path}: {exc}") from None


def check_config_files(paths: list[str | Path]) -> None:
    """Refuse duplicated keys in config files Snakemake has already loaded."""
    for p in paths:
        if Path(p).is_file():
            check_no_duplicate_keys(p)


def check_config(config: dict[str, Any], schema_path: str | Path, names: bool = True) -> dict[str, Any]:
    """Everything a config must pass: the schema (with defaults filled in), strict integers and
    cross-references. Returns ``config``."""
    from traintime.core.config import load_schema, validate_config

    validate_config(config, schema_path)
    check_strict_integers(config, load_schema(schema_path))
    check_cross_references(config, names=names)
    return config
