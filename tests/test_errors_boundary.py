"""One error boundary (traintime.core.boundary) for the CLI and the workflow scripts: one line naming
the culprit, the documented exit status, ``--debug`` for the traceback; one test per kind of failure
of issue 16 (corrupt files, paths, OS errors, argument ranges, config loading, data verification,
nothing lost on failure)."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from traintime.cli import main
from traintime.core import boundary
from traintime.core.boundary import EXIT_CODES, exit_code, guarded
from traintime.core.errors import (
    ArgumentError,
    ChecksumError,
    ConfigError,
    CorruptFileError,
    DataUnavailableError,
    DeviceStateError,
    SchemaError,
    TrainingError,
    TraintimeError,
    UnknownNameError,
)

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CNN = "epoch_time_prediction/data/CNN.csv"


def _err_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


# ---- the table -------------------------------------------------------------------------------


@pytest.mark.parametrize("exc, code", [
    (ConfigError("x"), 3), (SchemaError("x"), 4), (ChecksumError("x"), 4), (DataUnavailableError("x"), 4),
    (CorruptFileError("x"), 4), (TrainingError("x"), 6), (DeviceStateError("x"), 6), (ArgumentError("x"), 2),
    (UnknownNameError("x"), 2), (TraintimeError("x"), 2), (FileNotFoundError(2, "No such file", "a.csv"), 5),
    (PermissionError(13, "Permission denied", "out/"), 5), (OSError(errno.ENOSPC, "No space left", "t.csv"), 5),
    (KeyboardInterrupt(), 130), (ValueError("bug"), 70), (ZeroDivisionError(), 70),
])
def test_exit_codes_follow_the_documented_table(exc, code):
    assert exit_code(exc) == code
    assert f"\n{code} " in boundary.__doc__ or f"{code}  " in boundary.__doc__  # documented


def test_every_code_of_the_table_is_documented():
    for _, code in EXIT_CODES:
        assert any(line.startswith(str(code)) for line in boundary.__doc__.splitlines())


@pytest.mark.parametrize("exc, needle", [
    (OSError(errno.ENOSPC, "No space left on device", "results/tables/t.csv"),
     "results/tables/t.csv: no space left on device (disk full)"),
    (PermissionError(errno.EACCES, "Permission denied", "/ro/out.csv"), "/ro/out.csv: permission denied"),
    (OSError(errno.EROFS, "Read-only file system", "/mnt/ro/x"), "/mnt/ro/x: read-only file system"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "models/m.joblib"), "models/m.joblib: is a directory"),
])
def test_os_errors_become_one_line_naming_the_file(exc, needle, capsys):
    def fail():
        raise exc

    assert guarded(fail) == 5
    err = _err_lines(capsys)
    assert err == [f"error: {needle}" + err[0][len("error: ") + len(needle):]] and needle in err[0]
    assert "Traceback" not in "\n".join(err)


def test_internal_error_is_one_line_and_debug_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.delenv("TRAINTIME_DEBUG", raising=False)

    def bug():
        raise ZeroDivisionError("division by zero")

    assert guarded(bug) == 70
    err = _err_lines(capsys)
    assert len(err) == 1 and "internal error (ZeroDivisionError" in err[0] and "--debug" in err[0]
    assert guarded(bug, debug=True) == 70
    err = "\n".join(_err_lines(capsys))
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1].startswith("error: internal error")


def test_cli_debug_flag_anywhere_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.delenv("TRAINTIME_DEBUG", raising=False)
    argv = ["predict", "--model", "mixer", "--dataset", "cifar10", "--learning-rate", "inf"]
    assert main(argv) == 2
    assert _err_lines(capsys) == ["error: --learning-rate inf is not a finite number"]
    assert main([*argv, "--debug"]) == 2
    err = _err_lines(capsys)
    assert err[0].startswith("Traceback") and err[-1] == "error: --learning-rate inf is not a finite number"
    assert main(["--debug", *argv]) == 2
    assert _err_lines(capsys)[0].startswith("Traceback")


# ---- argument validation -------------------------------------------------------------------


@pytest.mark.parametrize("extra, needle", [
    (["--batch-size", "1000000000"], "--batch-size 1000000000 is out of range"),
    (["--batch-size", "60000"], "exceeds the 50000 training samples"),
    (["--learning-rate", "nan"], "--learning-rate nan is not a finite number"),
    (["--learning-rate=-1"], "--learning-rate -1 is out of range"),
    (["--top=-1"], "--top -1 is out of range"),
    (["--probe-batch-size", "0"], "--probe-batch-size 0 is out of range"),
    (["--coverage", "inf"], "--coverage inf is not a finite number"),
    (["--model-arg", "embd_dim=8"], "--model-arg embd_dim: not a parameter of the 'mixer' builder; did you mean: embed_dim"),
    (["--model-arg", "depth=inf"], "--model-arg depth=inf: not a finite number"),
    (["--model-arg", "depth=-3"], "--model-arg depth -3 is out of range"),
    (["--output", "/no/such/folder/r.csv"], "folder /no/such/folder does not exist"),
])
def test_predict_arguments_are_refused_before_any_work(extra, needle, capsys):
    assert main(["predict", "--model", "mixer", "--dataset", "cifar10", *extra]) == 2
    err = _err_lines(capsys)
    assert len(err) == 1 and needle in err[0], err


def test_missing_data_dir_is_refused_not_silently_ignored(tmp_path, capsys):
    models = tmp_path / "models" / "iteration"
    models.mkdir(parents=True)
    (models / "iteration_model.joblib").write_bytes(b"x")
    argv = ["predict", "--model", "mixer", "--dataset", "cifar10", "--models-dir", str(tmp_path / "models"),
            "--data-dir", str(tmp_path / "typo")]
    assert main(argv) == 2
    assert _err_lines(capsys) == [f"error: --data-dir {tmp_path / 'typo'}: no such folder"]


@pytest.mark.parametrize("content, needle", [
    (os.urandom(64) + b"\x00" * 64, "not a readable convergence model file, truncated or corrupt"),
    (None, "is a directory, expected a saved convergence model"),
])
def test_corrupt_or_folder_model_file_names_the_file(tmp_path, content, needle, capsys):
    # predict loads the saved convergence model for the epochs (step time comes from the roofline)
    (tmp_path / "models" / "iteration").mkdir(parents=True)
    (tmp_path / "models" / "iteration" / "iteration_model.joblib").write_bytes(b"x")
    path = tmp_path / "models" / "convergence" / "nested.joblib"  # the default convergence model
    if content is None:
        path.mkdir(parents=True)
    else:
        path.parent.mkdir(parents=True)
        path.write_bytes(content)
    (tmp_path / "data").mkdir()
    argv = ["predict", "--model", "mixer", "--dataset", "digits", "--models-dir", str(tmp_path / "models"),
            "--data-dir", str(tmp_path / "data"), "--probe-dataset", "synthetic", "--device", "cpu",
            "--probe-batch-size", "8", "--model-arg", "embed_dim=16", "--model-arg", "depth=1"]
    assert main(argv) == 4
    err = _err_lines(capsys)
    assert len(err) == 1 and str(path) in err[0] and needle in err[0], err


def test_builder_refusing_its_arguments_names_them():
    from traintime.core.errors import ArgumentError
    from traintime.measure.models import create_model

    with pytest.raises(ArgumentError, match=r"--model-arg bogus_arg=1: model 'resnet18' cannot be built"):
        create_model("resnet18", 10, 32, bogus_arg=1)


def test_extrapolation_gets_a_labelled_warning(tmp_path):
    from traintime.predict_checks import training_range_notes

    pd.DataFrame({"family": ["MLP", "MLP", "CNN"], "batch_size": [32, 128, 4096]}).to_csv(
        tmp_path / "iteration.csv", index=False)
    pd.DataFrame({"family": ["MLP", "MLP"], "learning_rate": [0.001, 0.1]}).to_csv(
        tmp_path / "convergence.csv", index=False)
    assert training_range_notes(tmp_path, "MLP", 64, 0.01) == []
    notes = training_range_notes(tmp_path, "MLP", 1024, 0.5)
    assert len(notes) == 2 and all(n.startswith("warning: extrapolation:") for n in notes)
    assert "batch size 1024" in notes[0] and "(32-128)" in notes[0] and "learning rate 0.5" in notes[1]


# ---- workflow scripts go through the same boundary -------------------------------------------


def test_run_script_uses_the_boundary_and_logs_to_the_rule_log(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from traintime.core.workflow import run_script

    log = tmp_path / "rule.log"
    sm = SimpleNamespace(log=[str(log)])

    def full_disk(_):
        raise OSError(errno.ENOSPC, "No space left on device", "results/data/iteration.csv")

    with pytest.raises(SystemExit) as exc:
        run_script(full_disk, "r", {"snakemake": sm})
    assert exc.value.code == 5
    assert "results/data/iteration.csv: no space left on device" in log.read_text()

    def bug(_):
        raise KeyError("oops")

    with pytest.raises(SystemExit) as exc:
        run_script(bug, "r", {"snakemake": sm})
    assert exc.value.code == 70
    text = log.read_text()
    assert "Traceback" in text and "internal error (KeyError" in text  # the log keeps the traceback


# ---- data stays verified -----------------------------------------------------------------------


def test_retrieved_file_changed_after_verification_is_refused(tmp_path):
    from traintime.data.retrieve import verify_raw_folder, verify_retrieved

    raw = tmp_path / "results" / "raw" / "chronos" / CNN
    raw.parent.mkdir(parents=True)
    raw.write_text("a,b\n1,2\n")
    good = hashlib.sha256(raw.read_bytes()).hexdigest()
    sources = {"chronos": {"files": {CNN: good}}}
    assert verify_raw_folder(sources, tmp_path / "results" / "raw") == 1
    verify_retrieved([raw], sources, raw_root=str(tmp_path / "results" / "raw"))
    raw.write_text("a,b\n1,2\n1,2\n")  # every row doubled after verification
    with pytest.raises(ChecksumError, match="changed after it was retrieved"):
        verify_retrieved([raw], sources, raw_root=str(tmp_path / "results" / "raw"))
    raw.write_text("a,b\n1,")  # truncated
    with pytest.raises(ChecksumError, match="changed after it was retrieved"):
        verify_raw_folder(sources, tmp_path / "results" / "raw")


def test_exact_duplicate_rows_are_refused():
    from traintime.core.io import reject_duplicate_rows

    df = pd.DataFrame({"a": [1, 2, 1], "b": [float("nan"), 3.0, float("nan")]})
    with pytest.raises(SchemaError, match=r"f\.csv: row 4 is an exact duplicate of row 2"):
        reject_duplicate_rows(df, "f.csv")
    assert reject_duplicate_rows(df.iloc[:2], "f.csv") is not None


def test_config_key_contradicting_its_columns_is_refused(tmp_path, capsys):
    ok = (REPO / "tests/corpus/iteration_ok_rows.csv").read_text()
    f = tmp_path / "it.csv"
    f.write_text(ok)
    assert main(["validate", "iteration", str(f)]) == 0
    f.write_text(ok.replace("|SGD|", "|Adam|"))
    assert main(["validate", "iteration", str(f)]) == 4
    assert "column 'config_key' row 2" in capsys.readouterr().err


# ---- nothing is lost on failure -----------------------------------------------------------------


def _snakemake(work: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1", *args],
                          cwd=work, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300)


def test_config_error_removes_no_previous_result(tmp_path):
    work = tmp_path / "work"
    previous = work / "results" / "data" / "iteration.csv"
    previous.parent.mkdir(parents=True)
    previous.write_text("a previous result\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("seeds: [42.0]\n")
    res = _snakemake(work, "results/data/iteration.csv", "--forceall", "--configfile", str(bad))
    assert res.returncode != 0
    assert "error: config: seeds[0]: 42.0 is not an integer" in res.stderr
    assert previous.read_text() == "a previous result\n"


def test_data_error_removes_no_previous_result(tmp_path, mirror):
    """A verified raw file survives a mistyped mirror, and a normaliser's previous output survives a
    raw file changed after verification."""
    work = tmp_path / "work"
    work.mkdir()
    target = f"results/raw/chronos/{CNN}"
    assert _snakemake(work, target, env={"TRAINTIME_DATA_MIRROR": str(mirror)}).returncode == 0
    raw = work / target
    verified = raw.read_bytes()
    res = _snakemake(work, target, env={"TRAINTIME_DATA_MIRROR": str(tmp_path / "mirrror-typo")})
    assert res.returncode == 0 and raw.read_bytes() == verified  # the mirror is not a rule parameter
    previous = work / "results" / "data" / "iteration.csv"
    previous.parent.mkdir(parents=True)
    previous.write_text("a previous result\n")
    raw.write_bytes(verified + verified.splitlines(keepends=True)[-1])  # a row doubled after verification
    res = _snakemake(work, "results/data/iteration.csv", "--forceall", env={"TRAINTIME_DATA_MIRROR": str(mirror)})
    assert res.returncode != 0 and "changed after it was retrieved" in res.stderr
    assert previous.read_text() == "a previous result\n" and raw.exists()
