"""Every shell command in the README's code blocks runs as written (issue 17.6, issue 15).

The commands are extracted from the README's fenced ``bash`` / ``sh`` / ``console`` blocks and its
indented ``$ command`` examples, and run from a copy of the repository whose ``.venv`` is the
environment running the tests and whose embedded ``config.yaml`` is the tiny test config
(``tests/e2e/config.yaml`` merged in). Snakemake commands get ``-n`` (a dry run) unless listed in
``RUN_FOR_REAL``; the `traintime predict` block runs on the saved models of the session's tiny DAG run
(``e2e_run``). Commands that cannot run here are listed in ``NOT_RUN`` with the reason; a command that
is neither run nor listed fails the test, and so does a listed command the README no longer has.
Shown output (``$ command`` followed by lines) must equal what the command prints, except in the
generated blocks, whose output comes from results/ (tests/test_readme.py).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHELL = {"bash", "sh", "shell", "console"}
GENERATED = re.compile(r"<!-- BEGIN results:[\w-]+ -->.*?<!-- END results:[\w-]+ -->", re.S)

#: Commands that are not run here, with the reason (every entry must still be in the README).
NOT_RUN: dict[str, str] = {
    "make run": "the whole default DAG (minutes; its cost is the generated 'Cost of the default DAG' block); "
                "the same Snakemake invocation runs here as `.venv/bin/snakemake -n` ('Running a subset')",
    "make test": "the test suite this test belongs to",
    "TRAINTIME_DATA_MIRROR=/data/traintime-mirror make run":
        "placeholder mirror path and the whole DAG; TRAINTIME_DATA_MIRROR is used by every Snakemake command "
        "here and by tests/test_workflow.py",
    ".venv/bin/snakemake --workflow-profile profiles/slurm":
        "submits jobs with sbatch: runs in tests/test_slurm.py on a single-node cluster (make test as root); "
        "its `-n` form runs here",
    ".venv/bin/snakemake --cores 1 --resources gpu=1 --configfile host.yaml":
        "host emulation on this machine's GPU (host_gpu: null reads the device at parse time; CI has no GPU): "
        "the same DAG for a named host GPU runs here with -n (next line of the README), the backends with "
        "fakes in tests/test_emulation_host_setup.py",
    "sudo .ci/slurm_up.sh": "root and apt-get: tests/test_slurm.py runs it itself when run as root",
    ".venv/bin/python -m pytest -m slurm tests/test_slurm.py": "part of `make test` (tests/test_slurm.py)",
    "sudo .ci/slurm_down.sh --purge": "root: tests/test_slurm.py stops the cluster itself",
}
#: Snakemake commands cheap enough to run without -n.
RUN_FOR_REAL = {".venv/bin/snakemake --cores 2 results/raw/chronos/epoch_time_prediction/data/CNN.csv"}
#: Words that start a command: an untagged fenced block holding one of them is an error (tag it bash).
COMMAND_WORDS = ("make", ".venv/", "sudo", "snakemake", "traintime", "python", "printf", "$ ", "TRAINTIME_")


@dataclass
class Block:
    lang: str
    line: int
    section: str
    commands: list[tuple[str, list[str] | None]] = field(default_factory=list)  # (command, shown output)
    text: str = ""

    @property
    def id(self) -> str:
        return f"L{self.line}:{self.section[:40]}"


def _strip_comment(cmd: str) -> str:
    return re.sub(r"\s+#\s.*$", "", cmd).strip()


def _join_continuations(lines: list[str]) -> list[str]:
    out: list[str] = []
    buf = ""
    for line in lines:
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1].rstrip() + " "
            continue
        out.append(buf + line.strip() if buf else line)
        buf = ""
    return out


def _console(lines: list[str]) -> list[tuple[str, list[str] | None]]:
    cmds: list[tuple[str, list[str] | None]] = []
    for line in lines:
        if line.startswith("$ "):
            cmds.append((_strip_comment(line[2:]), []))
        elif cmds and line.strip():
            cmds[-1][1].append(line.rstrip())
    return cmds


def readme_blocks(text: str) -> list[Block]:
    """Fenced blocks (generated ones left out) and indented ``$`` examples, with their commands."""
    text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    lines = text.splitlines()
    blocks: list[Block] = []
    section = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            section = line.lstrip("# ").strip()
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            j = i + 1
            while not lines[j].startswith("```"):
                j += 1
            body = lines[i + 1:j]
            b = Block(fence.group(1), i + 1, section, text="\n".join(body))
            if b.lang == "console":
                b.commands = _console(body)
            elif b.lang in SHELL:
                for cmd in _join_continuations(body):
                    cmd = _strip_comment(cmd)
                    if cmd and not cmd.startswith("#"):
                        b.commands.append((cmd, None))
            blocks.append(b)
            i = j + 1
            continue
        if line.startswith("    $ ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and lines[j].startswith("    "):
                j += 1
            b = Block("console", i + 1, section, text="\n".join(lines[i:j]))
            b.commands = _console([x[4:] for x in lines[i:j]])
            blocks.append(b)
            i = j
            continue
        i += 1
    return blocks


BLOCKS = readme_blocks(README.read_text())
SHELL_BLOCKS = [b for b in BLOCKS if b.lang in SHELL and b.commands]


def _needs_results(block: Block) -> bool:
    return any(c.startswith(".venv/bin/traintime predict") for c, _ in block.commands)


def _slow(block: Block) -> bool:
    return _needs_results(block) or any("snakemake" in c and c not in NOT_RUN for c, _ in block.commands)


def _copy(dst: Path) -> Path:
    """A copy of the repository (tracked layout, no results) whose .venv is this test's environment and
    whose config.yaml is the embedded default with the tiny test config merged in."""
    from traintime.core.config import merge_config_files

    top = {".git", ".venv", "results", ".snakemake", "report.zip", "data", "shared", ".pytest_cache"}

    def ignore(folder: str, names: list[str]) -> set[str]:
        skip = {n for n in names if n == "__pycache__" or n.endswith(".egg-info")}
        return skip | (top & set(names) if Path(folder) == REPO else set())

    shutil.copytree(REPO, dst, ignore=ignore, symlinks=True)
    (dst / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    merged = merge_config_files([REPO / "config.yaml", REPO / "tests" / "e2e" / "config.yaml"])
    (dst / "config.yaml").write_text(yaml.safe_dump(merged, sort_keys=False))
    return dst


def _as_run(cmd: str) -> str:
    if "snakemake" in cmd and cmd not in RUN_FOR_REAL and not re.search(r"\s-n(\s|$)", cmd):
        return cmd + " -n"
    return cmd


def _env(mirror: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
            "TRAINTIME_DATA_MIRROR": str(mirror)}


def _params():
    for b in SHELL_BLOCKS:
        marks = [pytest.mark.slow] if _slow(b) else []
        yield pytest.param(b, id=b.id, marks=marks)


def test_readme_has_command_blocks_and_every_not_run_entry_is_still_there():
    cmds = {c for b in SHELL_BLOCKS for c, _ in b.commands}
    assert len(cmds) >= 15
    assert set(NOT_RUN) <= cmds, sorted(set(NOT_RUN) - cmds)
    assert RUN_FOR_REAL <= cmds


def test_untagged_blocks_hold_no_commands_and_yaml_blocks_validate():
    from traintime.core.config import load_schema, merge_config_files, validate_config
    from traintime.core.config_checks import check_strict_integers

    for b in BLOCKS:
        if b.lang == "":
            bad = [l for l in b.text.splitlines() if l.lstrip().startswith(COMMAND_WORDS)]
            assert not bad, f"README line {b.line}: commands in an untagged block (tag it bash): {bad}"
        if b.lang == "yaml":
            cfg = merge_config_files([REPO / "config.yaml"])
            from traintime.core.config import deep_update

            deep_update(cfg, yaml.safe_load(b.text))
            validate_config(cfg, REPO / "schemas" / "config.schema.yaml")
            check_strict_integers(cfg, load_schema(REPO / "schemas" / "config.schema.yaml"))


def test_readme_shows_the_generated_predict_example_command():
    import shlex

    from traintime.core.readme import blocks_of
    from traintime.predict_cli_example import EXAMPLE_ARGS

    shown = blocks_of(README.read_text())["predict-example"]
    assert f"$ traintime {shlex.join(EXAMPLE_ARGS)}\n" in shown
    cmds = {c for b in SHELL_BLOCKS for c, _ in b.commands}
    assert f".venv/bin/traintime {shlex.join(EXAMPLE_ARGS)}" in cmds


@pytest.mark.parametrize("block", list(_params()))
def test_readme_block_runs_as_written(block: Block, tmp_path, request):
    mirror = request.getfixturevalue("mirror")
    work = _copy(tmp_path / "repo")
    if _needs_results(block):
        # "After `make run`": the saved models and tables of the session's tiny DAG run
        (work / "results").symlink_to(request.getfixturevalue("e2e_run") / "results", target_is_directory=True)
    for cmd, shown in block.commands:
        if cmd in NOT_RUN:
            continue
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", _as_run(cmd)], cwd=work, env=_env(mirror),
                             capture_output=True, text=True, timeout=600)
        if shown:  # the output the README shows, with its exit status (an error example)
            got = [l for l in (res.stdout + res.stderr).splitlines() if l.strip()]
            assert got == shown, f"README line {block.line}: `{cmd}` printed {got}, README shows {shown}"
            assert res.returncode != 0 or not any(l.startswith("error:") for l in shown)
            continue
        assert res.returncode == 0, (f"README line {block.line}: `{_as_run(cmd)}` exited {res.returncode}:\n"
                                     f"{res.stderr[-3000:]}")
