"""The DAG tells the truth: library code and measurements are inputs, timing rules run alone,
every rule has a log, a benchmark record and an environment, parse time imports no library code.

Reruns are checked on a copy of the repository whose outputs exist (empty files, mtimes ordered by
``snakemake --touch``): Snakemake then reports "nothing to be done" until a file changes, so what
``snakemake -n`` lists after a change is exactly what that change reruns. Nothing runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
TIMING_RULES = {"collect_bench", "collect_probe", "collect_converge",
                "emulation_host_sweep", "emulation_host_mapped", "emulation_host_ops"}


def _run(work: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRAINTIME_DATA_MIRROR": str(REPO.parent / "shared" / "data")}
    res = subprocess.run([SNAKEMAKE, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    return res


def _jobs(work: Path, *args: str) -> set[str]:
    """Rules of the jobs ``snakemake -n`` would run (empty when nothing is to be done)."""
    out = _run(work, "-n", "--quiet", "rules", *args)
    text = out.stdout + out.stderr
    if "Nothing to be done" in text:
        return set()
    table = text[text.index("job "):]
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+$", table, re.M)} - {"total"}


def _rulegraph(work: Path, *args: str) -> set[tuple[str, str]]:
    """Edges (upstream rule, downstream rule) of ``snakemake --rulegraph``."""
    dot = _run(work, "--rulegraph", *args).stdout
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', dot, re.M))
    return {(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)", dot, re.M)}


@pytest.fixture(scope="module")
def built_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository (tracked + untracked files, no results) whose every output exists
    and is up to date; built once per module (about 45 s) in ``<tmp>/repo`` and kept in ``<tmp>/pristine``."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    work = tmp_path_factory.mktemp("built") / "repo"
    for f in files:
        if f and not f.startswith("results/") and (REPO / f).is_file():
            (work / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, work / f)
    summary = _run(work, "--summary").stdout.splitlines()
    mirror = REPO.parent / "shared" / "data"
    for line in summary[summary.index(next(s for s in summary if s.startswith("output_file"))) + 1:]:
        rel = line.split("\t")[0]
        path = work / rel
        if not path.suffix:  # the directory() outputs (retrieved trace and external-benchmark folders)
            path.mkdir(parents=True, exist_ok=True)
        elif rel.startswith("results/raw/"):  # retrieved files are checked against their pinned sha256
            path.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(mirror / rel[len("results/raw/"):], path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    _run(work, "--touch", "--cores", "1", "--quiet", "all")
    assert _jobs(work) == set(), "a freshly touched copy should have nothing to do"
    shutil.copytree(work, work.with_name("pristine"), symlinks=True)
    return work


@pytest.fixture()
def built_copy(built_template: Path) -> Path:
    """The built copy, restored from ``pristine`` for each test (which may change it) at the path it was built in:
    Snakemake's metadata (.snakemake/) records the input files by absolute path and copies keep the file times, so
    the restored copy has nothing to do either (every test below asserts the exact jobs a change adds)."""
    shutil.rmtree(built_template)
    shutil.copytree(built_template.with_name("pristine"), built_template, symlinks=True)
    return built_template


def _downstream(edges: set[tuple[str, str]], start: set[str]) -> set[str]:
    out, todo = set(start), list(start)
    while todo:
        r = todo.pop()
        for a, b in edges:
            if a == r and b not in out:
                out.add(b)
                todo.append(b)
    return out


def test_changing_one_module_reruns_exactly_the_jobs_that_depend_on_it(built_copy):
    module = "traintime.emulation.plots"  # imported by workflow scripts only, not by other modules
    imports = re.compile(r"^\s*(?:from traintime\.emulation\.plots import|import traintime\.emulation\.plots"
                         r"|from traintime\.emulation import .*\bplots\b)", re.M)
    importers = [p.name for p in (REPO / "src").rglob("*.py") if imports.search(p.read_text())]
    assert importers == [], f"{module} is imported by library modules {importers}: pick another module"
    scripts = {p.stem for p in (built_copy / "workflow_scripts").glob("*.py") if imports.search(p.read_text())}
    rules_dir = built_copy / "rules"
    direct = {m.group(1) for f in rules_dir.glob("*.smk")
              for m in re.finditer(r"^\s*rule (\w+):(?:(?!^\s*rule ).)*?workflow_scripts/(\w+)\.py", f.read_text(),
                                   re.M | re.S) if m.group(2) in scripts}
    assert direct, scripts
    expected = _downstream(_rulegraph(built_copy), direct)

    path = built_copy / "src" / "traintime" / "emulation" / "plots.py"
    path.write_text(path.read_text() + "\n# an edit\n")
    assert _jobs(built_copy) == expected
    assert not any(r.startswith(("chronos_", "convergence_", "collect_", "retrieve")) for r in expected)


def test_a_new_measurement_file_reruns_the_emulation_analysis(built_copy):
    ref = built_copy / "results" / "reference"
    ref.mkdir(parents=True, exist_ok=True)
    (ref / "host_rows.csv").write_text("host_gpu,latency_ms\n")
    jobs = _jobs(built_copy)
    assert {"emulation_measurements", "emulation_predict", "emulation_claims"} <= jobs
    assert not any(r.startswith(("chronos_", "convergence_", "collect_")) for r in jobs)


def test_host_measurements_are_inputs_of_the_analysis(tmp_path):
    host_on = tmp_path / "host.yaml"
    host_on.write_text("emulation: {host: {enabled: true, host_gpu: RTX-5090, profile_ops: true, targets: [RTX-4060]}}\n")
    edges = _rulegraph(REPO, "--configfile", str(host_on))
    assert ("emulation_host_sweep", "emulation_measurements") in edges
    assert ("emulation_host_mapped", "emulation_measurements") in edges
    assert ("emulation_host_ops", "emulation_analytic") in edges
    # the default DAG has no GPU rule at all
    assert not any(r.startswith("emulation_host") for e in _rulegraph(REPO) for r in e)


def test_parse_time_imports_no_library_code_beyond_validation(tmp_path):
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('LOADED', sorted(m for m in sys.modules if m.startswith('traintime'))))\n"
             "from snakemake.cli import main\n"
             "sys.argv = ['snakemake', '-n', '--quiet', 'rules']\n"
             "main()\n")
    res = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "TRAINTIME_DATA_MIRROR": str(REPO.parent / "shared" / "data")})
    loaded = eval(re.search(r"LOADED (\[.*\])", res.stdout).group(1))
    # validation only: the config schema and its cross-references (config_checks, the GPU spec table)
    # and the pinned checksums of retrieved files (data.retrieve), the typing of --config values
    # (config_cli); no stage code shapes the DAG
    validation = {"traintime", "traintime.core", "traintime.core.config", "traintime.core.errors",
                  "traintime.core.config_cli",
                  "traintime.core.config_checks", "traintime.core.specs", "traintime.core.schema",
                  "traintime.core.io", "traintime.data", "traintime.data.retrieve"}
    assert set(loaded) <= validation, loaded


@pytest.fixture(scope="module")
def workflow():
    """The parsed workflow (host-emulation rules enabled, so the GPU rules are defined too)."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        OutputSettings,
        ResourceSettings,
    )

    host_on = REPO / "tests" / "e2e" / "host_enabled.yaml"
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        wf = api.workflow(snakefile=REPO / "Snakefile", workdir=REPO, resource_settings=ResourceSettings(cores=1),
                          config_settings=ConfigSettings(configfiles=[host_on]))
        yield wf._workflow


def test_every_rule_has_log_benchmark_env_and_timing_rules_hold_timing(workflow):
    rules = {r.name: r for r in workflow.rules}
    assert TIMING_RULES <= set(rules)
    for name, rule in rules.items():
        if name == "all":
            continue
        assert rule.log, f"{name}: no log"
        assert rule.conda_env, f"{name}: no conda env"
        if name != "dag_cost":  # it cannot read its own record; it measures itself in-process
            assert rule.benchmark, f"{name}: no benchmark"
        timing = dict(rule.resources.items()).get("timing", 0)
        assert (timing == 1) == (name in TIMING_RULES), f"{name}: timing={timing}"
    for name in ("emulation_host_sweep", "emulation_host_mapped", "emulation_host_ops"):
        assert dict(rules[name].resources.items()).get("gpu") == 1
    profile = (REPO / "profiles" / "default" / "config.yaml").read_text()
    assert re.search(r"^resources:\n  timing: 1$", profile, re.M)


def test_rules_use_the_torch_env_exactly_when_their_code_imports_torch(workflow):
    """Two dependency sets (envs/analysis.yaml, envs/torch.yaml): a rule needs torch when its script or
    a library module it imports imports torch at module level (host GPU rules import it on use)."""
    assert sorted(p.name for p in (REPO / "envs").glob("*.yaml")) == ["analysis.yaml", "torch.yaml"]
    top_torch = re.compile(r"^(?:import|from) (?:torch|torchvision|timm)\b", re.M)
    for rule in workflow.rules:
        if rule.name == "all":
            continue
        script = REPO / "rules" / rule.script if not os.path.isabs(rule.script) else Path(rule.script)
        files = [f for f in rule.input if str(f).endswith(".py")] + [script]
        imports_torch = any(top_torch.search(Path(f).read_text()) for f in files if os.path.isfile(f))
        needs = imports_torch or rule.name.startswith("emulation_host_")
        env = Path(str(rule.conda_env)).name
        assert env == ("torch.yaml" if needs else "analysis.yaml"), f"{rule.name}: {env}"


def test_new_local_rows_rerun_exactly_the_models_that_learn_them(built_copy, tmp_path):
    """collect.train_on released_and_local (default): the saved step-time and convergence models and the
    predict calibration read the merged local tables, so re-merged rows rerun exactly what depends on
    them; released_only cuts those edges."""
    edges = _rulegraph(built_copy)
    for edge in (("collect_merge_iteration", "chronos_iteration_model"),
                 ("collect_merge_iteration", "predict_interval_coverage"),
                 ("collect_merge_convergence", "convergence_model")):
        assert edge in edges, edge
    # merging new rows = the two merge jobs run again (-R: as when their inputs change); what Snakemake then
    # plans is exactly what depends on the merged tables (a missing or touched intermediate alone reruns
    # nothing in Snakemake 9 while the downstream outputs are newer)
    merges = {"collect_merge_iteration", "collect_merge_convergence"}
    jobs = _jobs(built_copy, "-R", *sorted(merges))
    assert jobs == _downstream(edges, merges)
    assert {"chronos_iteration_model", "convergence_model", "predict_interval_coverage", "end_to_end_example",
            "collect_table_before_after"} <= jobs
    assert not any(r.startswith(("retrieve", "chronos_iteration_evaluate", "convergence_evaluate", "emulation",
                                 "collect_bench", "collect_converge")) for r in jobs)
    only = tmp_path / "released_only.yaml"
    only.write_text("collect: {train_on: released_only}\n")
    cut = _rulegraph(built_copy, "--configfile", str(only))
    assert ("collect_merge_iteration", "chronos_iteration_model") not in cut
    assert ("collect_merge_convergence", "convergence_model") not in cut


def test_adding_a_seed_runs_only_that_seeds_iteration_jobs(built_copy):
    """Seed is a wildcard of the iteration stage: a fourth seed adds one evaluate job per protocol
    (every family inside it) for that seed; the parts of the other seeds stay; the aggregation (merge) and what
    reads it rerun."""
    (built_copy / "four_seeds.yaml").write_text("seeds: [42, 0, 1, 7]\n")
    res = _run(built_copy, "-n", "--configfile", "config.yaml", "four_seeds.yaml")
    text = res.stdout + res.stderr
    blocks = re.findall(r"^(?:local)?rule (\w+):\n((?:[ \t]+.*\n)+)", text, re.M)
    evaluate = [dict(kv.split("=", 1) for kv in re.search(r"wildcards: (.*)", body).group(1).split(", "))
                for rule, body in blocks if rule == "chronos_iteration_evaluate"]
    assert evaluate, text[-3000:]
    assert {w["seed"] for w in evaluate} == {"7"}
    assert len(evaluate) == 5  # every protocol, the new seed only
    rules = {rule for rule, _ in blocks}
    assert {"chronos_iteration_merge", "chronos_iteration_tables", "end_to_end_out_of_sample"} <= rules
