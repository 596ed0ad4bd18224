# Shared helpers: configuration validation (once), paths, environments, the library files each
# script runs, target registry. Only functions and constants here; rules live in the stage files.
#
# Parse time imports nothing of the traintime package beyond configuration validation
# (traintime.core.config wraps snakemake.utils.validate): the DAG's shape depends on the config and
# on files on disk, never on library code.

import ast
import os
import glob
import sys
from functools import lru_cache
from pathlib import Path

from snakemake.utils import min_version

from traintime.core.config import validate_config
from traintime.core.errors import ConfigError, TraintimeError

min_version("9.0")

try:
    # --config KEY=VALUE values arrive as strings ('[42]' -> ['42']): typed as the schema says first
    # (traintime.core.config_cli), then snakemake.utils.validate(config, schema, set_default=True),
    # first violation as one line.
    from traintime.core.config_cli import coerce_cli_overrides as _coerce_cli_overrides
    from traintime.core.config import load_schema as _load_schema

    _coerce_cli_overrides(config, dict(workflow.config_settings.config or {}),
                          _load_schema(workflow.source_path("../schemas/config.schema.yaml")))
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
BENCHMARKS = f"{RESULTS}/benchmarks"
REFERENCE = f"{RESULTS}/reference"

# Scheduling only (results do not depend on it): the rules on the way to the longest single job
# (predict_step_grouped, ~2-4 min on a 2-core laptop) get this priority, so it starts while the many
# short evaluate jobs still fill the other core instead of running alone at the end of the DAG.
# Priority is per rule: every convergence_evaluate job gets it, though only the final method's is on the way.
# The way: retrieve_file -> convergence_normalise -> convergence_evaluate, retrieve_traces -> normalise_traces,
# and collect_bench -> collect_merge_iteration (local_iteration.csv), -> predict_interval_coverage ->
# predict_public_eval -> predict_step_grouped (a fresh-clone run whose greedy schedule put the 45 iteration jobs first ended with
# predict_step_grouped alone on one core for 4 min).
LONGEST_JOB_PATH = 10
# Scheduling only: timing jobs with no inputs (collect_probe, collect_converge) hold the timing resource, so they run
# one after another; left at priority 0, the greedy scheduler kept them for last and the DAG ended with one of them
# alone on one core for about 20 s (fresh run of f0342ed). Above 0 and below LONGEST_JOB_PATH: they start once the
# chain to predict_step_grouped is under way and finish while the many evaluate jobs still fill the other core.
EARLY_TIMING = 5

REPO = Path(workflow.basedir)
SRC = REPO / "src"


def env(name):
    """Conda environment file of a dependency set (used with --sdm conda): ``analysis`` (CPU
    analysis: pandas, scikit-learn, XGBoost, matplotlib) or ``torch`` (measurement on the local
    CPU/GPU: analysis + torch, torchvision, timm, NVML)."""
    return f"../envs/{name}.yaml"


def bench(log_path):
    """The ``benchmark:`` file of a rule: its log path under results/benchmarks/ as ``.tsv``."""
    assert log_path.startswith(f"{LOGS}/") and log_path.endswith(".log"), log_path
    return f"{BENCHMARKS}/{log_path[len(LOGS) + 1:-len('.log')]}.tsv"


# --- library code as a tracked input --------------------------------------------------------
# Snakemake tracks a rule's `script:` file but not the library it imports. lib(name) lists the
# library source files (and packaged resource tables) that workflow_scripts/<name>.py imports,
# directly or through other library modules, found by reading import statements (ast; nothing is
# imported). Rules take them as an input, so editing one module reruns exactly the jobs whose
# scripts depend on it.

_RESOURCES = SRC / "traintime" / "resources"


@lru_cache(maxsize=None)
def _module_file(module):
    base = SRC.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


@lru_cache(maxsize=None)
def _direct_library_deps(path):
    """Library files imported by one Python file (lazy imports inside functions included), each
    with its parent packages' __init__ files, and resource tables named in it."""
    text = Path(path).read_text()
    modules = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{a.name}" for a in node.names)
    out = set()
    for module in modules:
        parts = module.split(".")
        if parts[0] != "traintime":
            continue
        for i in range(1, len(parts) + 1):
            f = _module_file(".".join(parts[:i]))
            if f is not None:
                out.add(f)
    if _RESOURCES.is_dir():
        out.update(r for r in _RESOURCES.iterdir() if r.is_file() and f'"{r.name}"' in text)
    return frozenset(out)


@lru_cache(maxsize=None)
def _library_closure(script):
    seen, todo = set(), list(_direct_library_deps(script))
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        if f.suffix == ".py":
            todo.extend(_direct_library_deps(f) - seen)
    return tuple(sorted(str(f) for f in seen))


def lib(script_name):
    """Library files run by ``workflow_scripts/<script_name>.py`` (absolute paths, sorted)."""
    return list(_library_closure(REPO / "workflow_scripts" / f"{script_name}.py"))


# --- measurements as inputs ----------------------------------------------------------------
# Host / device measurement files enter the DAG as inputs (not params), so an analysis runs after
# the sweeps that write them. EMULATION_HOST_OUTPUTS / _OP_OUTPUTS: rules/emulation_host.smk.


def emulation_measurement_inputs(wildcards):
    """Host latency files: those on disk in the measurement folders (folder order: the first folder
    wins on duplicated rows) and those the host rules will write."""
    found = [f for d in config["emulation"]["measurement_dirs"] for f in sorted(glob.glob(f"{d}/**/*.csv", recursive=True))]
    return list(dict.fromkeys(found + sorted(EMULATION_HOST_OUTPUTS)))


def emulation_op_inputs(wildcards):
    """Per-op host profiles: those matching emulation.op_profile_glob and those the host rules will write."""
    return sorted(set(glob.glob(config["emulation"]["op_profile_glob"])) | set(EMULATION_HOST_OP_OUTPUTS))


def source_files(source):
    """Paths pinned for a data source (config: data.sources.<source>.files)."""
    return sorted(config["data"]["sources"][source]["files"])


def raw_path(source, path):
    return f"{RAW}/{source}/{path}"


# CHRONOS iteration stage (rules/chronos_iteration.smk defines CI and CI_PRED before calling these)
def ci_seeds(protocol):
    """Seeds of one protocol: the first n_seeds of the global seeds (null = all)."""
    n = CI["protocol_settings"][protocol]["n_seeds"]
    return list(config["seeds"])[: n] if n is not None else list(config["seeds"])


def ci_parts(protocol, kind="predictions"):
    """One evaluate job's output per seed (seed is a wildcard: adding one runs only its jobs)."""
    return [f"{CI_PRED}/parts/{protocol}_{seed}.{kind}.csv" for seed in ci_seeds(protocol)]
