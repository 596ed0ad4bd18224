"""Glue between Snakemake rules and the library: one entry point for every workflow script.

Each file in ``workflow_scripts/`` ends with::

    if __name__ == "__main__":
        run_script(main, "rule_name", globals())

Inside Snakemake, ``snakemake`` is in the script's globals. Run by hand
(``python workflow_scripts/x.py [wildcard=value ...]`` from the repository root), a stand-in
object is built from the Snakefile by :func:`mock_snakemake`, PyPSA-Eur style, so the same file
runs inside and outside the DAG.

:func:`run_script` sends log records to the rule's ``log:`` file and to stderr, and runs the script
inside :mod:`traintime.core.boundary`: an expected failure (bad input, config, data, file system)
becomes one ``error:`` line naming the culprit and the exit status documented there. It also holds the
BLAS / OpenMP thread pools of the job to the rule's ``threads:`` (Snakemake sets ``OMP_NUM_THREADS`` and its
kin for ``shell:`` jobs only; a ``script:`` job's NumPy / SciPy would otherwise use every core, and two such
jobs side by side spend most of their CPU time spinning: ``predict_step_grouped`` took 363 CPU-s for 189 s
wall with two BLAS threads, 149 CPU-s for 164 s with one, same outputs byte for byte).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traintime.core.errors import ArgumentError, TraintimeError

log = logging.getLogger("traintime")

REPO_ROOT_MARKERS = ("Snakefile", "config.yaml")


def find_repo_root(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for cand in (here, *here.parents):
        if all((cand / m).exists() for m in REPO_ROOT_MARKERS):
            return cand
    raise TraintimeError(f"no Snakefile + config.yaml found in {here} or its parents: "
                         "run scripts from the repository root")


def mock_snakemake(rulename: str, configfiles: list[str] | None = None, **wildcards: str) -> Any:
    """Build the ``snakemake`` object a rule's script would get, without running Snakemake.

    Parses the workflow with Snakemake's API (so the config is validated as in a real run),
    expands ``rulename`` for the given wildcards and returns a
    :class:`snakemake.iocontainers.Snakemake` with input, output, params, log and config.
    """
    from snakemake.api import SnakemakeApi
    from snakemake.iocontainers import Snakemake, Wildcards
    from snakemake.settings.types import (
        ConfigSettings,
        OutputSettings,
        ResourceSettings,
    )

    root = find_repo_root()
    os.chdir(root)
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        wf_api = api.workflow(
            snakefile=root / "Snakefile",
            workdir=root,
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(configfiles=[Path(c) for c in (configfiles or [])]),
        )
        workflow = wf_api._workflow  # parses the Snakefile (validates the config)
        rule = workflow.get_rule(rulename)
        missing = [w for w in rule.wildcard_names if w not in wildcards]
        if missing:
            raise ArgumentError(f"rule {rulename} needs wildcard(s) {', '.join(sorted(missing))}: "
                                 f"pass them as name=value arguments")
        wc = dict(wildcards)
        inp = rule.expand_input(wc)[0]
        out = rule.expand_output(wc)[0]
        params = rule.expand_params(wc, inp, out, None)[0]
        logs = rule.expand_log(wc)
        for path in [*out, *logs]:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        wc_obj = Wildcards(fromdict=wc)
        return Snakemake(inp, out, params, wc_obj, 1, {}, logs, workflow.config, rulename, None,
                         str(root / "workflow_scripts"))


def _configure_logging(log_files: list[str]) -> None:
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    for h in list(root.handlers):
        root.removeHandler(h)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    for f in log_files[:1]:
        Path(f).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(f, mode="w"))
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    logging.captureWarnings(True)


def job_thread_limit(sm: Any) -> Any:
    """Context manager that caps the BLAS and OpenMP thread pools (threadpoolctl) at the job's ``threads``
    (at least 1; 1 where the object has none)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=max(1, int(getattr(sm, "threads", 1) or 1)))


def run_script(main: Callable[[Any], None], rulename: str, script_globals: dict[str, Any]) -> None:
    """Run ``main(snakemake)`` with logging, inside the error boundary of
    :mod:`traintime.core.boundary` (one ``error:`` line, documented exit status; the traceback of an
    internal error goes to the rule's log file, and to stderr with ``TRAINTIME_DEBUG=1``)."""
    from traintime.core.boundary import (
        EXIT_INTERNAL,
        debug_requested,
        error_message,
        exit_code,
        guarded,
    )

    sm = script_globals.get("snakemake")

    def body() -> None:
        nonlocal sm
        if sm is None:
            wildcards = dict(arg.split("=", 1) for arg in sys.argv[1:] if "=" in arg)
            sm = mock_snakemake(rulename, **wildcards)
        _configure_logging([str(p) for p in getattr(sm, "log", [])])
        try:
            with job_thread_limit(sm):
                main(sm)
        except BaseException as exc:
            if not isinstance(exc, SystemExit):
                # the rule's log file gets the message (and a bug's traceback) as well as stderr
                for h in logging.getLogger().handlers:
                    if isinstance(h, logging.FileHandler):
                        if exit_code(exc) == EXIT_INTERNAL or debug_requested():
                            h.handle(log.makeRecord(log.name, logging.ERROR, __file__, 0, "traceback",
                                                    (), (type(exc), exc, exc.__traceback__)))
                        h.handle(log.makeRecord(log.name, logging.ERROR, __file__, 0, "%s",
                                                (error_message(exc),), None))
            raise

    status = guarded(body)
    if status:
        sys.exit(status)
