"""The lock files of `make setup` (requirements/lock*.txt) agree with the pins people edit (requirements*.txt)."""

import importlib.util
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PINS = [ROOT / "requirements.txt", *sorted((ROOT / "requirements").glob("[!l]*.txt"))]  # not the lock files
LOCKS = [ROOT / "requirements" / "lock.txt", ROOT / "requirements" / "lock-cuda.txt"]


def _lines(path: Path) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()
            if ln.split("#", 1)[0].strip() and not ln.lstrip().startswith("-r")]


def _locked() -> dict[str, str]:
    out: dict[str, str] = {}
    for path in LOCKS:
        for ln in _lines(path):
            name, version = ln.split("==")
            key = canonicalize_name(name)
            assert key not in out, f"{key} pinned twice in the lock files"
            out[key] = version
    return out


def test_every_requirement_is_locked_at_a_version_it_allows():
    locked = _locked()
    for path in PINS:
        for ln in _lines(path):
            req = Requirement(ln)
            key = canonicalize_name(req.name)
            assert key in locked, f"{path.name}: {req.name} is not in requirements/lock*.txt (run `make lock`)"
            assert req.specifier.contains(locked[key], prereleases=True), (
                f"{path.name}: {ln} but the lock has {req.name}=={locked[key]} (run `make lock`)")


def test_cuda_runtime_apart_and_pip_not_locked():
    spec = importlib.util.spec_from_file_location("split_lock", ROOT / "requirements" / "split_lock.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    cuda, rest = mod.split(["torch==2.0", "nvidia-cublas==1", "nvidia-ml-py==2", "triton==3", "pip==26",
                            "cuda-bindings==4", "# comment", ""])
    assert cuda == ["cuda-bindings==4", "nvidia-cublas==1", "triton==3"]
    assert rest == ["nvidia-ml-py==2", "torch==2.0"]
    with pytest.raises(SystemExit, match="not an exact pin"):
        mod.split(["numpy>=2"])
    cuda_file = {canonicalize_name(ln.split("==")[0]) for ln in _lines(LOCKS[1])}
    assert cuda_file and all(re.match(r"^(nvidia-|cuda-|triton$)", n) for n in cuda_file)
    assert "pip" not in _locked()
