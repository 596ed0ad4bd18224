"""Shared fixtures: repository root and the offline data mirror (../shared/data in CI)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The static-feature cache of `traintime predict` (traintime.predict_cache) goes to a folder of this test
# session, never the user's ~/.cache/traintime (tests must neither read nor leave entries there).
if "TRAINTIME_CACHE" not in os.environ:
    os.environ["TRAINTIME_CACHE"] = tempfile.mkdtemp(prefix="traintime-test-cache-")

# Snakemake loads its SLURM executor plugin at start-up, and the plugin then runs `scontrol show config` (to word
# a help text). Where SLURM's tools are installed but no controller answers - a CI machine before or after the
# SLURM tests - that call waits about 9 s, on every `snakemake` a test starts. An empty SLURM configuration makes
# it fail at once; tests/test_slurm.py gives its cluster tests the real configuration back.
if "SLURM_CONF" not in os.environ:
    os.environ["SLURM_CONF"] = os.path.join(tempfile.mkdtemp(prefix="traintime-test-slurm-"), "slurm.conf")
    Path(os.environ["SLURM_CONF"]).write_text("")


def mirror_dir() -> Path | None:
    env = os.environ.get("TRAINTIME_DATA_MIRROR")
    cand = Path(env) if env else REPO.parent / "shared" / "data"
    return cand if cand.is_dir() else None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def mirror() -> Path:
    m = mirror_dir()
    if m is None:
        pytest.skip("no data mirror (set TRAINTIME_DATA_MIRROR or put shared/ beside the repo)")
    return m


class FakeEpochs:
    """Convergence regressor stub for predict tests: 20 epochs for every row."""

    def predict(self, rows):
        import numpy as np

        return np.full(len(rows), 20.0)


@pytest.fixture()
def fake_models_dir(tmp_path):
    """``make(meta) -> models dir`` holding a saved convergence model (:class:`FakeEpochs`) with metadata ``meta``."""
    from traintime.chronos.convergence import ConvergencePredictor

    def make(meta: dict) -> Path:
        models = tmp_path / "models"
        (models / "convergence").mkdir(parents=True, exist_ok=True)
        ConvergencePredictor(FakeEpochs(), meta).save(str(models / "convergence" / "chronos_rf.joblib"))
        return models

    return make


@pytest.fixture(scope="session")
def e2e_run(tmp_path_factory, mirror) -> Path:
    """Work folder of one uninterrupted run of the whole DAG on the tiny config tests/e2e/config.yaml
    (minutes; used by tests marked ``slow``): tests/test_e2e_dag.py checks it, and
    tests/test_readme_commands.py runs the README's `traintime predict` commands on its saved models."""
    import subprocess
    import sys

    work = tmp_path_factory.mktemp("run_a")
    cmd = [str(Path(sys.executable).with_name("snakemake")), "-s", str(REPO / "Snakefile"), "--directory", str(work),
           "--cores", "2", "--configfile", str(REPO / "tests" / "e2e" / "config.yaml")]
    res = subprocess.run(cmd, cwd=work, env={**os.environ, "TRAINTIME_DATA_MIRROR": str(mirror)},
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    (work / "snakemake.log").write_text(res.stdout + res.stderr)
    return work


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``gpu`` need a CUDA device: skipped (with the reason) where torch sees none."""
    gpu_items = [it for it in items if it.get_closest_marker("gpu") is not None]
    if not gpu_items:
        return
    try:
        import torch

        has_cuda = bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover - torch is a core dependency
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
        for it in gpu_items:
            it.add_marker(skip)
