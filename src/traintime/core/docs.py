"""Documentation generated from the code's single sources of truth.

``docs/data.md`` is rendered from the :class:`~traintime.core.schema.TableSchema` objects that the
pipeline validates its tables with, so the documentation cannot drift from the checks
(``tests/test_docs.py`` fails when the committed file is stale; regenerate it with
``traintime schemas > docs/data.md``).
"""

from __future__ import annotations

from importlib import import_module

from traintime.core.schema import TableSchema

#: (module, attribute, where the table lives) in the order the documentation shows them.
SCHEMAS: tuple[tuple[str, str, str], ...] = (
    ("traintime.data.chronos", "ITERATION", "`results/data/iteration.csv` (released CHRONOS rows; local rows use the same schema)"),
    ("traintime.data.chronos_convergence", "CONVERGENCE", "`results/data/convergence.csv`"),
    ("traintime.core.specs", "GPU_SPECS", "`src/traintime/resources/gpu_specs.csv` (or `config.yaml: gpu_specs`)"),
    ("traintime.emulation.schema", "TARGET_TRACE", "`results/data/traces.csv`"),
    ("traintime.emulation.schema", "HOST_LATENCY", "`results/emulation/host/*.csv`, `results/reference/*.csv`"),
    ("traintime.emulation.baselines", "OP_PROFILE", "`results/emulation/host/ops/*.csv`"),
    ("traintime.chronos.iteration_tables", "PREDICTIONS", "`results/data/iteration_predictions/*.csv`"),
    ("traintime.chronos.convergence_protocols", "PREDICTIONS", "`results/data/convergence_predictions/*.csv`"),
    ("traintime.emulation.analysis", "PREDICTIONS", "`results/emulation/predictions_*.csv`"),
    ("traintime.chronos.claims", "CLAIMS", "`src/traintime/resources/paper_chronos_claims.csv`"),
    ("traintime.emulation.claims", "CLAIMS", "`src/traintime/resources/paper_zero_shot.csv`"),
)

HEADER = """# Canonical tables

Generated from the schemas in `src/traintime/` by `traintime schemas` (do not edit by hand).
Every table is validated against its schema when it is read and before it is written: a missing
column, a wrong type, a value out of range or a duplicated key stops with one message naming the
file, the column and the row. Units are part of column names (`_ms`, `_mhz`, `_gbps`, `_gb`).
Columns marked *derived from the target* are never used as features by an honest feature set.
"""


def schemas() -> list[tuple[TableSchema, str]]:
    out = []
    for module, attr, where in SCHEMAS:
        out.append((getattr(import_module(module), attr), where))
    return out


def schema_by_name(name: str) -> TableSchema:
    """The documented schema called ``name``; unknown -> :class:`UnknownNameError` with the list."""
    from traintime.core.errors import unknown_name

    found = {schema.name: schema for schema, _ in schemas()}
    try:
        return found[name]
    except KeyError:
        raise unknown_name("table", name, found) from None


def render_data_docs() -> str:
    parts = [HEADER]
    for schema, where in schemas():
        head, _, body = schema.to_markdown().partition("\n")
        parts.append(f"{head}\n\nWhere: {where}.\n\n{body.lstrip()}")
    return "\n".join(parts)
