# Shared helpers: configuration validation (once), paths, environments, target registry.
# Only functions and constants here; rules live in the stage files.

import sys
from pathlib import Path

from snakemake.utils import min_version

from traintime.core.config import validate_config
from traintime.core.errors import ConfigError, TraintimeError
from traintime.data.retrieve import resolve_mirror

min_version("9.0")

try:
    validate_config(config, workflow.source_path("../schemas/config.schema.yaml"))
except ConfigError as _exc:
    sys.exit(f"error: {_exc}")

# What the schema cannot say (traintime.core.config_checks): duplicated keys in a --configfile,
# 42.0 where an integer is due, GPU names that the spec table does not know. Checked here, before
# any job runs, so no job fails (or loses its previous outputs) on them.
try:
    from traintime.core.config_checks import (
        check_config_files as _check_config_files,
        check_cross_references as _check_cross_references,
        check_strict_integers as _check_strict_integers,
    )
    from traintime.core.config import load_schema as _load_schema

    _check_config_files([*workflow.configfiles, *workflow.overwrite_configfiles])
    _check_strict_integers(config, _load_schema(workflow.source_path("../schemas/config.schema.yaml")))
    _check_cross_references(config, names=False)
except ConfigError as _exc:
    sys.exit(f"error: {_exc}")

# Retrieved files must still match their pins before any job runs (a normaliser failing on a
# changed file would fail only after Snakemake had removed its previous output).
try:
    from traintime.data.retrieve import verify_raw_folder as _verify_raw_folder

    _verify_raw_folder(config["data"]["sources"], "results/raw")
except TraintimeError as _exc:
    sys.exit(f"error: {_exc}")

# Every stage appends the files `rule all` must build.
ALL_TARGETS = []

RESULTS = "results"
RAW = f"{RESULTS}/raw"
DATA = f"{RESULTS}/data"
TABLES = f"{RESULTS}/tables"
FIGURES = f"{RESULTS}/figures"
MODELS = f"{RESULTS}/models"
LOGS = f"{RESULTS}/logs"
REFERENCE = f"{RESULTS}/reference"


def env(name):
    """Conda environment file of a rule family (used with --sdm conda)."""
    return f"../envs/{name}.yaml"


def source_files(source):
    """Paths pinned for a data source (config: data.sources.<source>.files)."""
    return sorted(config["data"]["sources"][source]["files"])


def raw_path(source, path):
    return f"{RAW}/{source}/{path}"


def data_mirror():
    mirror = resolve_mirror(config["data"]["mirror"])
    return str(mirror) if mirror else None
