"""Workflow glue: scripts run by hand, config errors and checksum failures through Snakemake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CNN = "epoch_time_prediction/data/CNN.csv"


def _run(args: list[str], cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=300)


def test_script_runs_by_hand_and_reports_user_errors_in_one_line(tmp_path):
    res = _run([sys.executable, "workflow_scripts/retrieve_file.py", "source=chronos"], REPO)
    assert res.returncode == 2  # EXIT_USAGE: a missing argument (traintime.core.boundary)
    assert "error: rule retrieve_file needs wildcard(s) path" in res.stderr
    assert "Traceback" not in res.stderr


def test_config_error_stops_snakemake_with_one_line(tmp_path):
    res = _run([SNAKEMAKE, "-n", "--config", "seedz=1"], REPO)
    assert res.returncode != 0
    lines = [l for l in res.stderr.splitlines() if l.startswith("error:")]
    assert lines == ["error: config: (top level): unknown key(s) ('seedz' was unexpected)"]
    assert "Traceback" not in res.stderr


def test_checksum_mismatch_in_mirror_fails_the_rule_and_leaves_no_output(tmp_path):
    mirror = tmp_path / "mirror"
    bad = mirror / "chronos" / CNN
    bad.parent.mkdir(parents=True)
    bad.write_text("dataset,model\nx,y\n")
    work = tmp_path / "work"
    work.mkdir()
    offline = tmp_path / "offline.yaml"
    offline.write_text("data:\n  allow_download: false\n")
    res = _run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1",
                f"results/raw/chronos/{CNN}", "--configfile", str(offline)],
               tmp_path, env={"TRAINTIME_DATA_MIRROR": str(mirror)})
    assert res.returncode != 0
    log = (work / "results/logs/retrieve/chronos" / f"{CNN}.log").read_text()
    assert "checksum mismatch for" in log and "expected 231002c1" in log
    assert not (work / "results/raw/chronos" / CNN).exists()


def test_retrieve_rule_copies_from_mirror(tmp_path, mirror):
    work = tmp_path / "work"
    work.mkdir()
    res = _run([SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "1",
                f"results/raw/chronos/{CNN}"], tmp_path, env={"TRAINTIME_DATA_MIRROR": str(mirror)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert (work / "results/raw/chronos" / CNN).read_bytes() == (mirror / "chronos" / CNN).read_bytes()


def test_run_script_holds_blas_threads_to_the_rule_threads():
    """A script job's NumPy/SciPy BLAS pools use the rule's `threads`, not every core, and get them back after."""
    from types import SimpleNamespace

    import numpy  # noqa: F401  (loads the BLAS whose pool is checked)
    from threadpoolctl import threadpool_info, threadpool_limits

    from traintime.core.workflow import run_script

    seen = []
    with threadpool_limits(limits=2):  # what a 2-core machine gives an unlimited job
        before = [i["num_threads"] for i in threadpool_info()]
        run_script(lambda sm: seen.append([i["num_threads"] for i in threadpool_info()]), "r",
                   {"snakemake": SimpleNamespace(log=[], threads=1)})
        after = [i["num_threads"] for i in threadpool_info()]
    assert seen and seen[0] and set(seen[0]) == {1}
    assert after == before
