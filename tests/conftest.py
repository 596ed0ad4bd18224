"""Shared fixtures: repository root and the offline data mirror (../shared/data in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The static-feature cache of `traintime predict` (traintime.predict_cache) goes to a folder of this test
# session, never the user's ~/.cache/traintime (tests must neither read nor leave entries there).
if "TRAINTIME_CACHE" not in os.environ:
    import tempfile

    os.environ["TRAINTIME_CACHE"] = tempfile.mkdtemp(prefix="traintime-test-cache-")


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
