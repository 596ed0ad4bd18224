"""The traintime command line: one-line errors, exit status 2, no traceback; the gpus listing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from traintime.cli import COMMANDS, build_parser, main


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "traintime.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_bad_model_name_is_one_line_exit_2_no_traceback() -> None:
    r = _run(["predict", "--model", "resnet5O", "--dataset", "cifar100", "--gpu", "T4"])
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown model 'resnet5O'")
    assert "resnet50" in lines[0]  # close match offered
    assert "Traceback" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize("args, needle", [
    (["predict", "--model", "resnet50", "--dataset", "cifar1000"], "unknown dataset 'cifar1000'"),
    (["predict", "--model", "resnet50", "--dataset", "cifar100", "--gpu", "T5"], "unknown GPU 'T5'"),
    (["predict", "--model", "resnet50", "--dataset", "cifar100", "--optimizer", "adamx"], "unknown optimizer"),
    (["predict", "--model", "resnet50"], "give --dataset NAME, or --input-size PX and --num-classes K"),
    (["predict", "--model", "resnet50", "--dataset", "cifar100", "--gpu", "A100"], "ambiguous"),
    (["predict", "--model", "resnet50", "--dataset", "cifar100", "--precision", "8"], "precision '8'"),
    (["predict", "--model", "resnet50", "--dataset", "cifar100", "--models-dir", "/nonexistent"],
     "--models-dir /nonexistent: no such folder"),
    (["frobnicate"], "invalid choice"),
])
def test_other_user_errors(args: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]


def test_gpus_lists_the_spec_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gpus", "--csv"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gpu,architecture") and "price_date" in out[0]
    assert any(line.startswith("T4,") for line in out)


def test_commands_are_registered_and_extensible() -> None:
    assert {"predict", "gpus"} <= set(COMMANDS)
    parser = build_parser()
    assert parser.parse_args(["gpus"]).command == "gpus"
