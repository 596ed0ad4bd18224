"""Host emulation on any host (issue 17.4): host GPU from the device, backends without root by default."""

from __future__ import annotations

import pytest

from traintime.core.errors import ConfigError, DeviceStateError
from traintime.core.specs import load_specs
from traintime.emulation.host_setup import (
    detect_host_gpu,
    device_name,
    resolve_backends,
    resolve_mapping_backend,
    resolved_host_config,
)

SPECS = load_specs()


class FakeNvml:
    """Read-only NVML: records every call, so a test can see that nothing but reads happened."""

    def __init__(self, name: str | bytes | None):
        self.name = name
        self.calls: list[str] = []

    def nvmlInit(self):
        self.calls.append("init")
        if self.name is None:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.calls.append("shutdown")

    def nvmlDeviceGetHandleByIndex(self, i):
        self.calls.append(f"handle{i}")
        return i

    def nvmlDeviceGetName(self, h):
        self.calls.append("name")
        return self.name


def _no_cuda(index: int) -> None:
    return None


def test_host_gpu_null_is_read_from_nvml_without_changing_anything():
    nv = FakeNvml(b"NVIDIA GeForce RTX 4090")
    assert detect_host_gpu(None, SPECS, nvml=nv, cuda_name=_no_cuda) == "RTX-4090"
    assert nv.calls == ["init", "handle0", "name", "shutdown"]  # reads only: no clock lock, no context


def test_host_gpu_falls_back_to_torch_name_and_a_configured_name_wins():
    assert detect_host_gpu(None, SPECS, nvml=FakeNvml(None), cuda_name=lambda i: "NVIDIA H100 80GB HBM3") \
        == "H100-SXM"
    nv = FakeNvml(b"NVIDIA GeForce RTX 4090")
    assert detect_host_gpu("RTX 5090", SPECS, nvml=nv, cuda_name=_no_cuda) == "RTX-5090"
    assert nv.calls == []  # a configured host GPU reads no device
    assert device_name(nvml=None, cuda_name=_no_cuda) is None


def test_no_gpu_or_unknown_gpu_is_one_line_naming_the_key():
    with pytest.raises(ConfigError, match=r"emulation\.host\.host_gpu is null .* no GPU is visible here; set "
                                          r"emulation\.host\.host_gpu") as exc:
        detect_host_gpu(None, SPECS, nvml=FakeNvml(None), cuda_name=_no_cuda)
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match=r"the device 'Imaginary GPU 9000' is not in the GPU spec table; .*gpu_specs"):
        detect_host_gpu(None, SPECS, nvml=FakeNvml("Imaginary GPU 9000"), cuda_name=_no_cuda)


def test_auto_picks_the_backends_that_need_no_root():
    assert resolve_backends("auto", "auto", root=False) == ("green_ctx", "analytic_clock")
    assert resolve_backends("auto", "auto", root=True) == ("green_ctx", "analytic_clock")  # root ones stay opt-in
    assert resolve_backends("green_ctx", "none", root=False) == ("green_ctx", "none")
    assert resolve_backends("mps", "nvml_clock", root=True) == ("mps", "nvml_clock")


@pytest.mark.parametrize("backend,clock,key,alt", [
    ("mps", "auto", "backend", "backend: green_ctx"),
    ("auto", "nvml_clock", "clock_backend", "clock_backend: analytic_clock"),
])
def test_root_backends_without_root_stop_with_one_line(backend, clock, key, alt):
    with pytest.raises(ConfigError) as exc:
        resolve_backends(backend, clock, root=False)
    msg = str(exc.value)
    assert msg.startswith(f"config: emulation.host.{key}: ") and "needs root" in msg and alt in msg
    assert "\n" not in msg


def test_mapping_backend_auto_follows_the_host_backend():
    assert resolve_mapping_backend("auto", "auto") == "green_ctx"
    assert resolve_mapping_backend("auto", "mps") == "mps"
    assert resolve_mapping_backend("mps", "auto") == "mps"


def test_resolved_host_config_and_the_sweep_job_use_it(tmp_path):
    cfg = {"host_gpu": None, "backend": "auto", "clock_backend": "auto", "models": ["test_vit"]}
    out = resolved_host_config(cfg, SPECS, root=False, nvml=FakeNvml("NVIDIA GeForce RTX 3060"), cuda_name=_no_cuda)
    assert (out["host_gpu"], out["backend"], out["clock_backend"]) == ("RTX-3060", "green_ctx", "analytic_clock")
    assert out["models"] == ["test_vit"] and cfg["host_gpu"] is None  # the input is not changed


def test_schema_defaults_are_auto_and_null():
    from pathlib import Path

    from traintime.core.config import merge_config_files, validate_config

    repo = Path(__file__).resolve().parents[1]
    cfg = validate_config(merge_config_files([repo / "config.yaml"]), repo / "schemas" / "config.schema.yaml")
    host = cfg["emulation"]["host"]
    assert (host["host_gpu"], host["backend"], host["clock_backend"]) == (None, "auto", "auto")
    assert cfg["emulation"]["mapping_backend"] == "auto"


def test_the_sweep_job_refuses_mps_without_root_before_touching_the_device(tmp_path, monkeypatch):
    import traintime.emulation.host_setup as hs
    from traintime.emulation.sweep import host_sweep_job

    monkeypatch.setattr(hs, "is_root", lambda: False)
    cfg = {"models": ["test_vit"], "img_sizes": [32], "batch_sizes": [2], "precisions": ["fp32"],
           "host_gpu": "RTX-5090", "backend": "mps", "clock_backend": "none", "host_clock_mhz": None,
           "p_grid": [100], "f_grid": [], "replays": 1, "child_timeout_s": 60}
    with pytest.raises(ConfigError, match="emulation.host.backend: mps needs root"):
        host_sweep_job(cfg, tmp_path / "s.csv")
    assert not (tmp_path / "s.csv").exists()
    # green contexts need no root: the job goes on to the device check (no GPU here)
    monkeypatch.setattr(hs, "is_root", lambda: False)
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(DeviceStateError, match="expected to measure on GPU 'RTX-5090'"):
            host_sweep_job({**cfg, "backend": "auto", "clock_backend": "auto"}, tmp_path / "s.csv")
