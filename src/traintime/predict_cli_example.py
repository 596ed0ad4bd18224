"""The README's ``traintime predict`` example, run and written down by the workflow (rule
``predict_cli_example``), so that the output shown in the README is generated, never typed.

:func:`run_cli_example` runs the ``traintime`` command line in-process with the given arguments and
returns the text a user sees after ``$ traintime ARGS`` (stdout only; the command must succeed).
"""

from __future__ import annotations

import contextlib
import io
import shlex
from collections.abc import Sequence
from pathlib import Path

from traintime.core.errors import TraintimeError

__all__ = ["EXAMPLE_ARGS", "run_cli", "run_cli_example", "write_cli_example"]

#: The README's first ``traintime predict`` command (static features, no probe): a test checks that the
#: README shows exactly this command.
EXAMPLE_ARGS: tuple[str, ...] = ("predict", "--model", "resnet50", "--dataset", "imagenet", "--batch-size", "256",
                                 "--precision", "16", "--no-probe", "--epochs", "90", "--gpu", "RTX 4090")


def run_cli(args: Sequence[str]) -> str:
    """What ``traintime ARGS`` printed on stdout, run in-process. A failing command raises
    :class:`TraintimeError` with the last line it printed on stderr."""
    from traintime.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(args))
    if status != 0:
        raise TraintimeError(f"`traintime {shlex.join(args)}` exited with status {status}: "
                             f"{err.getvalue().strip().splitlines()[-1:] or ''}")
    return out.getvalue()


def run_cli_example(args: Sequence[str], extra: Sequence[str] = ()) -> str:
    """``$ traintime ARGS`` followed by what the command printed on stdout. ``extra`` arguments (folders
    of the run) are passed too but not shown. A failing command raises :class:`TraintimeError`."""
    return f"$ traintime {shlex.join(args)}\n{run_cli([*args, *extra])}"


def write_cli_example(out_path: str | Path, models_dir: str | Path, data_dir: str | Path,
                      specs: str | None = None, args: Sequence[str] = EXAMPLE_ARGS) -> str:
    """Run the example on the saved models of this run and write the transcript to ``out_path``."""
    from traintime.core.io import write_text

    extra = ["--models-dir", str(models_dir), "--data-dir", str(data_dir)]
    if specs:
        extra += ["--specs", str(specs)]
    text = run_cli_example(args, extra)
    write_text(text, Path(out_path))
    return text
