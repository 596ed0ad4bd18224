"""Running the pipeline on SLURM: the profile (fast, always run) and a real single-node cluster.

The ``slurm``-marked tests start the test cluster of ``.ci/slurm_up.sh`` when none answers (and
stop it again afterwards), run the tiny DAG of ``tests/slurm/Snakefile`` through
``snakemake --executor slurm`` with a copy of ``profiles/slurm`` (its GPU rule resources capped to
the test node), check in ``sacct`` that every job went through sbatch, and compare the outputs
byte by byte with a local run of the same DAG.

Without root or apt-get the cluster cannot be started and those tests are skipped, unless
``TRAINTIME_REQUIRE_SLURM=1`` (set in CI), which turns the skip into a failure.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "profiles" / "slurm" / "config.yaml"
TEST_SNAKEFILE = REPO / "tests" / "slurm" / "Snakefile"
SLURM_UP = REPO / ".ci" / "slurm_up.sh"
SLURM_DOWN = REPO / ".ci" / "slurm_down.sh"

# Rules of the pipeline that need a GPU (the list of GPU stages).
GPU_RULE_PREFIXES = ("collect_bench", "collect_probe", "collect_converge", "emulation_host_")
GPU_RESOURCE_KEYS = {"slurm_partition", "gpu", "cpus_per_gpu", "runtime", "mem_mb"}
# The test cluster (.ci/slurm_up.sh): partitions and the GRES type of its stand-in GPU.
TEST_CPU_PARTITION = "debug"
TEST_GPU_TYPE = os.environ.get("TRAINTIME_SLURM_GPU_TYPE", "testgpu")
FETCHED = ["epoch_convergence_prediction/data/MLP.csv",
           "epoch_convergence_prediction/data/Transformer.csv"]
SNAKEMAKE_TIMEOUT_S = 300


def load_profile() -> dict:
    return yaml.safe_load(PROFILE.read_text())


def gpu_entries(profile: dict) -> dict[str, dict]:
    return {rule: res for rule, res in profile.get("set-resources", {}).items()
            if isinstance(res, dict) and res.get("gpu")}


@functools.lru_cache(maxsize=1)
def workflow_rules() -> frozenset[str]:
    """Names of the rules of the main Snakefile (``snakemake --list-rules``), read with
    profiles/slurm as the workflow profile (an option Snakemake does not know fails here)."""
    # The host-emulation GPU rules exist only when emulation.host.enabled is true: list them too.
    with tempfile.TemporaryDirectory() as tmp:
        host_on = Path(tmp) / "host_on.yaml"
        # host_gpu named: null reads this machine's GPU when the Snakefile is parsed, and CI has none
        host_on.write_text("emulation: {host: {enabled: true, host_gpu: RTX-5090}}\n")
        proc = subprocess.run(
            [sys.executable, "-m", "snakemake", "--list-rules", "--workflow-profile", str(PROFILE.parent),
             "--configfile", str(host_on)],
            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (f"snakemake --list-rules --workflow-profile profiles/slurm "
                                  f"failed:\n{proc.stderr[-3000:]}")
    names = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert "all" in names, proc.stdout
    return frozenset(names)


# ------------------------------------------------------------------------------ the profile
def test_profile_is_a_slurm_profile_with_site_defaults():
    profile = load_profile()
    assert profile["executor"] == "slurm"
    defaults = profile["default-resources"]
    assert {"slurm_partition", "runtime", "mem_mb"} <= set(defaults)
    # cpus_per_task would win over cpus_per_gpu in the plugin and starve the GPU jobs' loaders.
    assert "cpus_per_task" not in defaults
    assert gpu_entries(profile), "profiles/slurm lists no GPU rule"


def test_profile_gpu_rules_request_one_gpu_in_a_gpu_partition():
    profile = load_profile()
    cpu_partition = profile["default-resources"]["slurm_partition"]
    for rule, res in gpu_entries(profile).items():
        assert rule.startswith(GPU_RULE_PREFIXES), f"{rule}: not a GPU stage of the pipeline"
        missing = GPU_RESOURCE_KEYS - set(res)
        assert not missing, f"profiles/slurm: {rule} lacks {sorted(missing)}"
        assert res["gpu"] == 1, f"{rule}: gpu must be 1 (one device per measurement job)"
        assert res["slurm_partition"] != cpu_partition, f"{rule}: GPU job in the CPU partition"
        assert isinstance(res["runtime"], int) and res["runtime"] > 0
        assert isinstance(res["mem_mb"], int) and res["mem_mb"] > 0
        assert isinstance(res["cpus_per_gpu"], int) and res["cpus_per_gpu"] >= 1


def test_profile_covers_every_gpu_rule_of_the_workflow():
    rules = workflow_rules()
    gpu_rules = {r for r in rules if r.startswith(GPU_RULE_PREFIXES)}
    listed = set(gpu_entries(load_profile()))
    missing = sorted(gpu_rules - listed)
    assert not missing, (f"GPU rules without GPU resources in profiles/slurm/config.yaml "
                         f"(set-resources): {missing}")


def test_profile_names_only_rules_of_the_workflow():
    # Snakemake silently ignores set-resources of an unknown rule (a renamed rule would lose its GPU).
    unknown = sorted(set(load_profile().get("set-resources", {})) - workflow_rules())
    assert not unknown, (f"profiles/slurm/config.yaml sets resources of rules the Snakefile does "
                         f"not have: {unknown} (renamed?)")


# ------------------------------------------------------------------------------ the cluster
@pytest.fixture(autouse=True, scope="module")
def _real_slurm_config():
    """SLURM's own configuration for this module: tests/conftest.py points SLURM_CONF at an empty file for the
    rest of the session (no controller wait on each `snakemake` start); an empty file named there is dropped."""
    with pytest.MonkeyPatch.context() as mp:
        conf = os.environ.get("SLURM_CONF")
        if conf and os.path.isfile(conf) and os.path.getsize(conf) == 0:
            mp.delenv("SLURM_CONF")
        yield


def _unavailable(reason: str) -> None:
    if os.environ.get("TRAINTIME_REQUIRE_SLURM") == "1":
        pytest.fail(f"{reason} (TRAINTIME_REQUIRE_SLURM=1 requires the SLURM tests to run)")
    pytest.skip(reason)


def test_missing_cluster_is_a_skip_locally_and_a_failure_when_ci_requires_it(monkeypatch):
    monkeypatch.delenv("TRAINTIME_REQUIRE_SLURM", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no cluster"):
        _unavailable("no cluster")
    monkeypatch.setenv("TRAINTIME_REQUIRE_SLURM", "1")
    with pytest.raises(pytest.fail.Exception, match="TRAINTIME_REQUIRE_SLURM=1"):
        _unavailable("no cluster")


@pytest.mark.parametrize("script", [SLURM_UP, SLURM_DOWN], ids=lambda p: p.name)
def test_ci_scripts_are_valid_bash(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert os.access(script, os.X_OK), f"{script} is not executable"


def _cluster_answers() -> bool:
    if not shutil.which("sinfo") or not shutil.which("sacctmgr"):
        return False
    try:
        state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20)
        clusters = subprocess.run(["sacctmgr", "-n", "-P", "show", "cluster", "format=cluster"],
                                  capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired:
        return False
    up = any(s.strip() in {"idle", "mix", "alloc"} for s in state.stdout.splitlines())
    return state.returncode == 0 and up and clusters.returncode == 0 and bool(clusters.stdout.strip())


@pytest.fixture(scope="module")
def slurm_cluster():
    """A cluster that answers sinfo and sacct; started (and stopped afterwards) when needed."""
    answered = _cluster_answers()
    if not answered and os.geteuid() != 0:
        _unavailable("no SLURM cluster answers and starting one (.ci/slurm_up.sh) needs root")
    if not answered and not (shutil.which("sbatch") or shutil.which("apt-get")):
        _unavailable("no SLURM cluster answers and apt-get is unavailable to install one")
    if os.geteuid() == 0:
        # idempotent: starts the cluster, or only the daemons of it that died, or does nothing
        t0 = time.monotonic()
        proc = subprocess.run(["bash", str(SLURM_UP)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            if not answered:  # leave no half-started daemons behind
                subprocess.run(["bash", str(SLURM_DOWN)], capture_output=True, timeout=180)
            pytest.fail(f".ci/slurm_up.sh failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
        print(f"slurm_up.sh: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    started = not answered
    parts = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True).stdout.split()
    if not {TEST_CPU_PARTITION, "gpu"} <= set(parts):
        _unavailable(f"the running SLURM cluster has partitions {parts}, not the test cluster of "
                     ".ci/slurm_up.sh (debug, gpu)")
    yield
    if started and os.environ.get("TRAINTIME_SLURM_KEEP") != "1":
        subprocess.run(["bash", str(SLURM_DOWN)], capture_output=True, text=True, timeout=180)


def _snakemake(args: list[str], workdir: Path, mirror: Path, log_name: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env["TRAINTIME_DATA_MIRROR"] = str(mirror)
    cmd = [sys.executable, "-m", "snakemake", "-s", str(TEST_SNAKEFILE), "-d", str(workdir),
           "--configfile", str(REPO / "config.yaml"), str(workdir / "test_config.yaml"), *args]
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=SNAKEMAKE_TIMEOUT_S)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        # TimeoutExpired carries bytes whatever text= says
        out = "".join(s.decode(errors="replace") if isinstance(s, bytes) else (s or "")
                      for s in (exc.stdout, exc.stderr))
        rc = 124
        run_id = re.search(r"SLURM run ID: (\S+)", out)
        if run_id:  # do not leave the jobs of a hung run in the queue
            subprocess.run(["scancel", "--name", run_id.group(1)], capture_output=True)
    (workdir / log_name).write_text(out)
    return rc, out


def _write_test_config(workdir: Path, gpu_rule: str) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "test_config.yaml").write_text(
        yaml.safe_dump({"slurm_test": {"files": FETCHED, "gpu_rule": gpu_rule}}))


def _test_profile(dest: Path) -> tuple[Path, str, dict]:
    """profiles/slurm with its GPU rules capped to the test node and pinned to its GPU type,
    as a site would pin gpu_model. Returns (profile dir, GPU rule used, its resources)."""
    profile = load_profile()
    capped = {}
    for rule, res in gpu_entries(profile).items():
        capped[rule] = {**res, "cpus_per_gpu": 1, "mem_mb": 200, "runtime": 5,
                        "gpu_model": TEST_GPU_TYPE}
    profile["set-resources"] = {**profile["set-resources"], **capped}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    gpu_rule = sorted(capped)[0]
    return dest, gpu_rule, capped[gpu_rule]


@pytest.fixture(scope="module")
def slurm_run(slurm_cluster, mirror, tmp_path_factory):
    """The test DAG through the SLURM executor: (workdir, log, GPU rule, its resources)."""
    base = tmp_path_factory.mktemp("slurm")
    profile_dir, gpu_rule, gpu_res = _test_profile(base / "profile")
    workdir = base / "run"
    _write_test_config(workdir, gpu_rule)
    t0 = time.monotonic()
    rc, log = _snakemake(
        ["--workflow-profile", str(profile_dir), "--executor", "slurm", "--jobs", "2",
         "--default-resources", f"slurm_partition={TEST_CPU_PARTITION}", "runtime=5", "mem_mb=100",
         "--slurm-init-seconds-before-status-checks", "1", "summary.csv", "allocation.json"],
        workdir, mirror, "snakemake_slurm.log")
    print(f"snakemake --executor slurm: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    assert rc == 0, f"snakemake --executor slurm failed (rc {rc}):\n{log[-6000:]}"
    return workdir, log, gpu_rule, gpu_res


def _submitted(log: str) -> dict[str, str]:
    """SLURM job id -> rule name, from Snakemake's 'submitted with SLURM jobid' lines."""
    out = {}
    for m in re.finditer(r"submitted with SLURM jobid (\d+) \(log: (\S+?)\)", log):
        rule = re.search(r"/rule_([A-Za-z0-9_]+)/", m.group(2))
        assert rule, m.group(0)
        out[m.group(1)] = rule.group(1)
    return out


def _sacct(job_ids: list[str], timeout_s: float = 30) -> dict[str, dict[str, str]]:
    """sacct rows of the allocations (-X) of ``job_ids``; waits until all are recorded as ended."""
    fields = ["JobID", "JobName", "Partition", "State", "ExitCode", "Comment", "AllocTRES"]
    deadline = time.monotonic() + timeout_s
    while True:
        proc = subprocess.run(["sacct", "-X", "-n", "-P", "-j", ",".join(job_ids),
                               "-o", ",".join(fields)], capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
        rows = {r[0]: dict(zip(fields, r)) for r in
                (line.split("|") for line in proc.stdout.splitlines() if line.strip())}
        done = all(rows.get(j, {}).get("State") not in (None, "PENDING", "RUNNING") for j in job_ids)
        if done or time.monotonic() > deadline:
            return rows
        time.sleep(1)


@pytest.mark.slurm
def test_every_job_went_through_sbatch_and_sacct_lists_it(slurm_run):
    workdir, log, gpu_rule, gpu_res = slurm_run
    submitted = _submitted(log)
    expected_rules = {"slurm_fetch": len(FETCHED), "slurm_summarise": 1, gpu_rule: 1}
    got_rules = {r: list(submitted.values()).count(r) for r in set(submitted.values())}
    assert got_rules == expected_rules, f"jobs submitted per rule: {got_rules}\n{log[-3000:]}"
    run_id = re.search(r"SLURM run ID: (\S+)", log).group(1)

    rows = _sacct(sorted(submitted))
    assert set(rows) == set(submitted), f"sacct lists {sorted(rows)}, submitted {sorted(submitted)}"
    for job_id, rule in submitted.items():
        row = rows[job_id]
        assert row["State"] == "COMPLETED" and row["ExitCode"] == "0:0", row
        assert row["JobName"] == run_id, row  # the plugin names every job of a run by its run ID
        assert row["Comment"].startswith(f"rule_{rule}"), row
        if rule == gpu_rule:
            assert row["Partition"] == gpu_res["slurm_partition"], row
            assert "gres/gpu=1" in row["AllocTRES"], row
        else:
            assert row["Partition"] == TEST_CPU_PARTITION, row
            assert "gres/gpu" not in row["AllocTRES"], row


@pytest.mark.slurm
def test_gpu_rule_job_ran_in_its_allocation_with_the_project_environment(slurm_run):
    workdir, log, gpu_rule, gpu_res = slurm_run
    record = json.loads((workdir / "allocation.json").read_text())
    gpu_job = [j for j, r in _submitted(log).items() if r == gpu_rule]
    assert record["SLURM_JOB_ID"] == gpu_job[0]
    assert record["SLURM_JOB_PARTITION"] == gpu_res["slurm_partition"]
    # jobs run the caller's interpreter (the project's virtual environment) and library
    assert Path(record["python"]).resolve() == Path(sys.executable).resolve()
    assert Path(record["traintime"]).resolve().is_relative_to(REPO / "src")


@pytest.mark.slurm
def test_slurm_outputs_are_byte_identical_to_a_local_run(slurm_run, mirror, tmp_path):
    workdir, _, gpu_rule, _ = slurm_run
    local = tmp_path / "local"
    _write_test_config(local, gpu_rule)
    rc, log = _snakemake(["--workflow-profile", "none", "--cores", "2", "summary.csv"],
                         local, mirror, "snakemake_local.log")
    assert rc == 0, f"local run failed:\n{log[-4000:]}"
    outputs = ["summary.csv", *(f"raw/chronos/{p}" for p in FETCHED)]
    for rel in outputs:
        assert (workdir / rel).read_bytes() == (local / rel).read_bytes(), f"{rel} differs"
    lines = (local / "summary.csv").read_text().splitlines()
    assert len(lines) == 1 + len(FETCHED) and lines[0].startswith("file,n_rows,n_columns,mean_")
