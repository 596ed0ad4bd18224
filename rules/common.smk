# Shared helpers: configuration validation (once), paths, environments, target registry.
# Only functions and constants here; rules live in the stage files.

import sys
from pathlib import Path

from snakemake.utils import min_version

from traintime.core.config import validate_config
from traintime.core.errors import ConfigError
from traintime.data.retrieve import resolve_mirror

min_version("9.0")

try:
    validate_config(config, workflow.source_path("../schemas/config.schema.yaml"))
except ConfigError as _exc:
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
