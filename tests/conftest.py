"""Shared fixtures: repository root and the offline data mirror (../shared/data in CI)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


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
