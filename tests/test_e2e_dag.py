"""End-to-end: the whole DAG on a tiny configuration (tests/e2e/config.yaml), plus fault tests.

1. An uninterrupted run completes and leaves nothing to do (every target of `rule all` exists).
2. A second run, SIGKILLed in the middle of the live collection and then resumed
   (`--unlock`, rerun), ends with the same tables: byte-identical for everything computed from
   the released data, and the same rows (no row lost or duplicated) for the local measurements,
   whose timings naturally differ between runs. It starts from a copy of the first run's folder
   without the outputs of the collection and of every job downstream of it, so it redoes those,
   not the analyses of the released data (half the test's time).
The tiny config scales the estimators down: none of its numbers is a result.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CONFIG = REPO / "tests" / "e2e" / "config.yaml"

# Files holding live measurements of this machine (timings differ from run to run): the per-job
# measurement files under results/collect/, the tables built from them, and the report index
# (it lists file sizes), the DAG cost table and the README blocks built from it (job wall times), and the step-time
# benchmark table (wall times of fits; their records are under results/logs/).
MEASURED = ("local_", "probe_", "predict_example", "analytic_crosscheck", "report_index", "dag_cost", "readme_blocks",
            "step_benchmark")


#: the rules that measure on this machine (rules/collect.smk)
COLLECT_RULES = ("collect_bench", "collect_probe", "collect_converge")


def _measured(name: str) -> bool:
    return "collect" in Path(name).parts or any(m in Path(name).name for m in MEASURED)


def _cmd(work: Path, *extra: str) -> list[str]:
    return [SNAKEMAKE, "-s", str(REPO / "Snakefile"), "--directory", str(work), "--cores", "2",
            "--configfile", str(CONFIG), *extra]


def _env(mirror: Path) -> dict[str, str]:
    return {**os.environ, "TRAINTIME_DATA_MIRROR": str(mirror)}


def _tables(work: Path) -> dict[str, Path]:
    out = {}
    for p in sorted((work / "results").rglob("*")):
        if p.is_file() and p.suffix in (".csv", ".md") and "logs" not in p.parts and "raw" not in p.parts:
            out[str(p.relative_to(work))] = p
    return out


@pytest.fixture(scope="module")
def uninterrupted(e2e_run) -> Path:
    """The tiny DAG run once per session (tests/conftest.py; the README commands test reuses it)."""
    return e2e_run


def _rules_that_ran(log: str) -> set[str]:
    """Rule names of Snakemake's "Job stats" table in a run's log."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Job stats:"))
    out = set()
    for line in lines[start + 3:]:
        parts = line.split()
        if len(parts) != 2 or parts[0] == "total":
            break
        out.add(parts[0])
    return out


@pytest.mark.slow
def test_no_two_timing_jobs_overlapped(uninterrupted):
    # profiles/default caps resources timing at 1 and every timing rule holds timing=1, so even with
    # --cores 2 the benchmark, probe and convergence jobs ran one after another.
    from traintime.core.report import benchmark_records, overlapping_jobs

    records = benchmark_records(uninterrupted / "results" / "benchmarks")
    timing = records[records["rule"].isin(["collect_bench", "collect_probe", "collect_converge"])]
    assert set(timing["rule"]) == {"collect_bench", "collect_probe", "collect_converge"}
    assert len(timing) >= 4
    assert overlapping_jobs(timing) == []
    # the check can fail: other jobs of the same run did overlap on its two cores
    assert overlapping_jobs(records) != []


@pytest.mark.slow
def test_dag_cost_lists_every_rule_that_ran(uninterrupted):
    cost = pd.read_csv(uninterrupted / "results" / "tables" / "dag_cost.csv")
    # readme_blocks reads dag_cost.csv, so it runs after it (and `all` runs nothing)
    ran = _rules_that_ran((uninterrupted / "snakemake.log").read_text()) - {"all", "readme_blocks"}
    assert ran and set(cost["rule"]) == ran
    assert (cost["wall_s_total"] > 0).all()
    # memory is sampled from 0.5 s into a job (snakemake.benchmark): only sub-second rules may have none (NaN)
    assert (cost["max_rss_mb"] > 0).where(cost["wall_s_max"] >= 2.0, True).all()
    assert cost.loc[cost["max_rss_mb"].isna(), "wall_s_max"].lt(2.0).all() and not (cost["max_rss_mb"] <= 0).any()


@pytest.mark.slow
def test_dag_completes_and_nothing_is_left_to_do(uninterrupted, mirror):
    res = subprocess.run(_cmd(uninterrupted, "-n"), cwd=uninterrupted, env=_env(mirror), capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0
    assert "Nothing to be done" in res.stdout + res.stderr
    for path in ("results/claims_chronos.md", "results/claims_zero_shot.md", "results/data/iteration.csv",
                 "results/data/convergence.csv", "results/data/traces.csv", "results/data/local_iteration.csv"):
        assert (uninterrupted / path).stat().st_size > 0, path


@pytest.mark.slow
def test_sigkill_during_collection_then_rerun_gives_the_same_tables(uninterrupted, tmp_path, mirror):
    work = tmp_path / "run_b"
    shutil.copytree(uninterrupted, work, symlinks=True)  # file times kept: only what the collection feeds is redone
    # the outputs, logs and benchmark records of the collection's jobs and of every job downstream of them (as
    # Snakemake's --forcerun lists them) removed, as if the collection had never run here; Snakemake leaves a missing
    # file alone while what it feeds is present, so the downstream files go too
    dry = subprocess.run(_cmd(work, "-n", "--forcerun", *COLLECT_RULES), cwd=work, env=_env(mirror),
                         capture_output=True, text=True, timeout=300, check=True)
    files = [f.strip() for line in dry.stdout.splitlines() if line.strip().startswith(("output:", "log:", "benchmark:"))
             for f in line.split(":", 1)[1].split(",")]
    assert any("results/collect/" in f for f in files) and "results/data/local_iteration.csv" in files
    for f in files:
        (work / f).unlink(missing_ok=True)
    collect_logs = work / "results" / "logs" / "collect"
    shutil.rmtree(collect_logs)
    proc = subprocess.Popen(_cmd(work), cwd=work, env=_env(mirror), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 600
    # wait until a collection job is running, then kill the whole process group without warning
    while time.time() < deadline and proc.poll() is None:
        if collect_logs.exists() and any(collect_logs.rglob("*.log")):
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the DAG finished before it could be killed"
    time.sleep(2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    env = _env(mirror)
    subprocess.run(_cmd(work, "--unlock"), cwd=work, env=env, capture_output=True, check=True, timeout=300)
    res = subprocess.run(_cmd(work), cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    ran = _rules_that_ran(res.stdout + res.stderr)
    assert ran & set(COLLECT_RULES) and ran & {"collect_merge_iteration", "collect_merge_convergence"}, sorted(ran)

    a, b = _tables(uninterrupted), _tables(work)
    assert sorted(a) == sorted(b)
    for name in a:
        if _measured(name) and name.endswith(".md"):
            assert len(a[name].read_text().splitlines()) == len(b[name].read_text().splitlines()), name
        elif _measured(name):
            ta, tb = pd.read_csv(a[name]), pd.read_csv(b[name])
            assert list(ta.columns) == list(tb.columns), name
            assert len(ta) == len(tb), f"{name}: rows lost or duplicated"
        else:
            assert a[name].read_bytes() == b[name].read_bytes(), f"{name} differs between runs"
    local = pd.read_csv(work / "results/data/local_iteration.csv")
    key_cols = [c for c in ("model", "dataset", "optimizer", "batch_size", "precision_bits") if c in local.columns]
    assert not local.duplicated(key_cols).any()
