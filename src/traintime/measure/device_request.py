"""Which device a collection job was asked for, checked against the device it finds.

A collection job (rules ``collect_bench``, ``collect_probe``, ``collect_converge``) is *asked for a GPU*
when the config says ``collect.device: cuda[:i]``, when ``collect.expected_gpu`` names one, or when it
runs under SLURM (``SLURM_JOB_ID`` set) with a GPU request of the profile (``resources: gpu >= 1``,
profiles/slurm). The expected GPU comes from ``collect.expected_gpu`` or, when that is null, from the
profile's ``gpu_model`` / ``constraint`` of the rule. :func:`resolve_collect` then

* fails with one line (:class:`~traintime.core.errors.DeviceStateError`) when a job asked for a GPU
  finds none (``device: auto`` would otherwise silently measure the CPU);
* fails with one line when the GPU found is not an expected one (config or profile, each checked);
* otherwise returns the collect settings with ``expected_gpu`` set to the GPU found (its canonical
  name when the spec table knows it), so a GPU run never records a null expectation.

Test-only hook: with ``TRAINTIME_FAKE_GPU=<name>`` in the environment and no CUDA device,
:func:`traintime.measure.device.describe_device` reports a CUDA device of that name while the work runs
on the CPU; rows measured that way record it in ``gpu_reported`` (``... [fake ...]``). It exists so the
walkthrough test (tests/test_add_your_gpu.py) can run the whole "add your GPU" path on a CPU-only
machine; never set it for a real measurement.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from traintime.core.errors import DeviceStateError, UnknownNameError

FAKE_GPU_ENV = "TRAINTIME_FAKE_GPU"


def fake_gpu() -> str | None:
    """The GPU name of the test-only hook (``TRAINTIME_FAKE_GPU``), or None."""
    name = os.environ.get(FAKE_GPU_ENV, "").strip()
    return name or None


@dataclass(frozen=True)
class GpuRequest:
    """``required``: the job must run on a GPU; ``expected``: names it must match (with where each
    comes from); ``reason``: why a GPU is required (for the error line)."""

    required: bool
    expected: tuple[tuple[str, str], ...]
    reason: str


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def gpu_request(collect: Mapping[str, Any], resources: Mapping[str, Any] | None = None,
                environ: Mapping[str, str] | None = None) -> GpuRequest:
    """What the config and (under SLURM) the job's resources ask of the device; see module doc."""
    res = dict(resources or {})
    env = os.environ if environ is None else environ
    device = str(collect.get("device", "auto")).strip().lower()
    expected: list[tuple[str, str]] = []
    if collect.get("expected_gpu"):
        expected.append((str(collect["expected_gpu"]), "collect.expected_gpu"))
    slurm = bool(env.get("SLURM_JOB_ID"))
    if slurm:
        for key in ("gpu_model", "constraint"):
            if res.get(key) not in (None, "", "none"):
                expected.append((str(res[key]), f"SLURM profile {key}"))
    reasons = []
    if device.startswith("cuda"):
        reasons.append(f"collect.device is {device}")
    if slurm and _int(res.get("gpu")) >= 1:
        reasons.append(f"the SLURM job {env.get('SLURM_JOB_ID')} requested gpu: {_int(res.get('gpu'))}")
    if expected:
        reasons.append(f"{expected[0][1]} is {expected[0][0]}")
    if device == "cpu" and not reasons:
        return GpuRequest(False, (), "")
    return GpuRequest(bool(reasons), tuple(expected), "; ".join(reasons))


def _stem(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _matches(wanted: str, found_name: str, found_canonical: str | None, specs: pd.DataFrame) -> bool:
    """``wanted`` (a spec-table name or alias, or a SLURM GRES type / feature such as ``a100``) names the
    GPU found: the same canonical GPU, else ``wanted`` is contained in the reported name."""
    from traintime.core.specs import canonical_gpu

    try:
        return canonical_gpu(wanted, specs) == found_canonical
    except UnknownNameError:
        return bool(_stem(wanted)) and _stem(wanted) in _stem(found_name)


def resolve_collect(collect: Mapping[str, Any], resources: Mapping[str, Any] | None = None,
                    environ: Mapping[str, str] | None = None, info: Any = None,
                    specs: pd.DataFrame | None = None, job: str = "collection job") -> dict[str, Any]:
    """The collect settings to measure with, after checking the device against the request (see module
    doc): ``expected_gpu`` set to the canonical GPU found on a GPU run (kept null when the spec table
    does not know the card: the rows then record its reported name). Names resolve in ``specs``, else
    in the table at ``collect['gpu_specs']`` (the config's ``gpu_specs``), else the packaged one."""
    from traintime.core.specs import canonical_gpu, load_specs
    from traintime.measure.device import describe_device

    out = dict(collect)
    if str(collect.get("device", "auto")).strip().lower() == "cpu":
        return out  # the CPU asked for explicitly: measured and recorded as the CPU
    req = gpu_request(collect, resources, environ)
    if info is None:
        idx = str(collect.get("device", "auto")).partition(":")[2]
        info = describe_device(int(idx) if idx.isdigit() else 0, nvml=False)
    if not info.is_cuda:
        if req.required:
            raise DeviceStateError(f"{job}: asked for a GPU ({req.reason}) but no CUDA device is present; "
                                   "refusing to measure the CPU instead")
        return out
    specs = load_specs(collect.get("gpu_specs")) if specs is None else specs
    try:
        found = canonical_gpu(info.name, specs)
    except UnknownNameError:
        found = None
    for wanted, where in req.expected:
        if not _matches(wanted, info.name, found, specs):
            raise DeviceStateError(f"{job}: {where} asks for GPU {wanted!r} but the device present is "
                                   f"{info.name!r}; refusing to write rows for the wrong GPU")
    out["expected_gpu"] = found
    return out
