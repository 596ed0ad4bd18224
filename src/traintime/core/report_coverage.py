"""Which tables and figures of the default DAG ``make report`` (``snakemake --report``) includes.

A table counts as included when its ``.csv`` or its ``.md`` rendering is wrapped in ``report(...)``
(Snakemake's report flag); a figure when its ``.png`` is. :func:`dag_outputs` builds the DAG of the
default target with Snakemake's API (as ``snakemake --report`` does, nothing runs) and lists every
output file with its report flag; :func:`missing_from_report` names the tables and figures under
``results/tables`` and ``results/figures`` that the report would leave out. Run as
``python -m traintime.core.report_coverage [WORKDIR]`` it prints them, one per line (exit status 1
when any is missing).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

__all__ = ["dag_outputs", "missing_from_report"]


def dag_outputs(snakefile: Path, workdir: Path, configfiles: list[Path] | None = None) -> list[tuple[str, str, bool]]:
    """(rule, output path, wrapped in ``report()``) of every job of the default target's DAG, all jobs
    forced (``--forceall``) so the answer does not depend on what ``workdir`` already holds. Uses
    Snakemake's workflow object as its ``--report`` code path does (private API of Snakemake 9)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        DAGSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
    )

    with SnakemakeApi(OutputSettings()) as api:
        wf_api = api.workflow(resource_settings=ResourceSettings(cores=1),
                              config_settings=ConfigSettings(configfiles=list(configfiles or [])),
                              storage_settings=StorageSettings(), snakefile=Path(snakefile).absolute(),
                              workdir=Path(workdir).absolute())
        wf_api.dag(DAGSettings())
        workflow = wf_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        return sorted({(job.rule.name, str(f), bool(f.flags.get("report")))
                       for job in workflow.dag.jobs for f in job.output})


def missing_from_report(outputs: list[tuple[str, str, bool]]) -> list[str]:
    """Tables (``results/tables/*.csv``) and figures (``results/figures/*.png``) of ``outputs`` that are
    not in the report: neither the file nor, for a table, its ``.md`` sibling carries the report flag."""
    reported = {path for _, path, flag in outputs if flag}
    missing = []
    for _, path, _ in outputs:
        p = Path(path)
        if p.parent.as_posix() == "results/tables" and p.suffix == ".csv":
            if path not in reported and p.with_suffix(".md").as_posix() not in reported:
                missing.append(path)
        elif p.parent.as_posix() == "results/figures" and p.suffix == ".png" and path not in reported:
            missing.append(path)
    return sorted(set(missing))


def main(argv: list[str]) -> int:
    repo = Path(__file__).resolve().parents[3]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(argv[0]) if argv else Path(tmp)
        outputs = dag_outputs(repo / "Snakefile", work)
    missing = missing_from_report(outputs)
    for path in missing:
        print(path)
    n = sum(1 for _, p, _ in outputs if p.startswith(("results/tables/", "results/figures/")))
    print(f"{len(missing)} of the DAG's {n} table/figure files are not in the report", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
