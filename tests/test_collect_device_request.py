"""Collection jobs check their device where it matters (traintime.measure.device_request): asked for a GPU
(config device cuda, expected_gpu, or a SLURM job with a GPU request) and none present -> one-line
DeviceStateError; another GPU than expected -> one-line error; a GPU run records the GPU it found.
Fake devices only (no GPU needed)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from traintime.core.errors import DeviceStateError
from traintime.measure.device import DeviceInfo
from traintime.measure.device_request import gpu_request, resolve_collect

CPU = DeviceInfo(name="cpu", is_cuda=False)
T4 = DeviceInfo(name="Tesla T4", is_cuda=True, index=0)
A100 = DeviceInfo(name="NVIDIA A100 80GB PCIe", is_cuda=True, index=0)
SLURM = {"SLURM_JOB_ID": "123"}


def _fails(match: str, **kw) -> str:
    with pytest.raises(DeviceStateError, match=match) as err:
        resolve_collect(**kw)
    msg = str(err.value)
    assert "\n" not in msg  # one line
    return msg


def test_config_cuda_without_a_gpu_fails_in_one_line() -> None:
    msg = _fails("no CUDA device", collect={"device": "cuda", "expected_gpu": None}, environ={}, info=CPU,
                 job="collect_bench x")
    assert msg.startswith("collect_bench x: asked for a GPU (collect.device is cuda)")


def test_slurm_gpu_request_without_a_gpu_fails_but_a_local_auto_run_measures_the_cpu() -> None:
    c = {"device": "auto", "expected_gpu": None}
    msg = _fails("no CUDA device", collect=c, resources={"gpu": 1}, environ=SLURM, info=CPU)
    assert "SLURM job 123 requested gpu: 1" in msg
    # the same job outside SLURM (rule resources gpu=1 only limit local concurrency): the CPU, as configured
    assert resolve_collect(c, resources={"gpu": 1}, environ={}, info=CPU) == c
    # an explicit device: cpu is never turned into a GPU requirement
    assert resolve_collect({"device": "cpu", "expected_gpu": None}, {"gpu": 1}, SLURM, info=CPU)["device"] == "cpu"


def test_another_gpu_than_the_config_names_fails() -> None:
    msg = _fails("wrong GPU", collect={"device": "auto", "expected_gpu": "A100-PCIe-80GB"}, environ={}, info=T4)
    assert "collect.expected_gpu asks for GPU 'A100-PCIe-80GB'" in msg and "'Tesla T4'" in msg


def test_profile_gpu_model_sets_the_expectation_under_slurm() -> None:
    c = {"device": "auto", "expected_gpu": None}
    res = {"gpu": 1, "gpu_model": "a100"}
    assert gpu_request(c, res, SLURM).expected == (("a100", "SLURM profile gpu_model"),)
    assert resolve_collect(c, res, SLURM, info=A100)["expected_gpu"] == "A100-PCIe-80GB"
    _fails("SLURM profile gpu_model asks for GPU 'a100'", collect=c, resources=res, environ=SLURM, info=T4)
    # config and profile both given: each is checked
    _fails("collect.expected_gpu", collect={"device": "cuda", "expected_gpu": "T4"}, resources=res,
           environ=SLURM, info=A100)


def test_a_gpu_run_never_keeps_a_null_expectation() -> None:
    out = resolve_collect({"device": "auto", "expected_gpu": None}, {}, {}, info=T4)
    assert out["expected_gpu"] == "T4"
    # unknown card: stays null, the rows record the reported name (gpu_reported)
    other = DeviceInfo(name="Some New Card 9000", is_cuda=True, index=0)
    assert resolve_collect({"device": "cuda", "expected_gpu": None}, {}, {}, info=other)["expected_gpu"] is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="the fake hook acts only without CUDA")
def test_fake_gpu_hook_reports_the_cpu_under_a_gpu_name_and_labels_the_rows(monkeypatch) -> None:
    from traintime.measure.device import describe_device
    from traintime.measure.timing import device_columns

    monkeypatch.delenv("TRAINTIME_FAKE_GPU", raising=False)
    assert device_columns(torch.device("cpu"))["gpu"] == "cpu"
    monkeypatch.setenv("TRAINTIME_FAKE_GPU", "RTX-4090")
    assert describe_device(nvml=False).is_cuda
    cols = device_columns(torch.device("cpu"), "RTX-4090")
    assert cols["gpu"] == "RTX-4090" and "fake" in cols["gpu_reported"] and cols["device"] == "cpu"
    assert cols["fp32_gflops"] == pd.to_numeric(cols["fp32_gflops"])  # spec columns joined
    with pytest.raises(DeviceStateError):
        device_columns(torch.device("cpu"), "T4")
    # resolved config on the fake: expectation recorded
    assert resolve_collect({"device": "auto", "expected_gpu": None}, {}, {})["expected_gpu"] == "RTX-4090"


def test_a_card_of_the_configs_spec_table_resolves(tmp_path) -> None:
    """collect['gpu_specs'] (the config's gpu_specs, passed by the collect rules): its cards are known."""
    from traintime.core.specs import load_specs

    specs = load_specs()
    mine = specs[specs["gpu"] == "A40"].copy()
    mine["gpu"], mine["aliases"] = "RTX-A6000", "NVIDIA RTX A6000;RTX A6000"
    path = tmp_path / "specs.csv"
    pd.concat([specs, mine]).to_csv(path, index=False)
    card = DeviceInfo(name="NVIDIA RTX A6000", is_cuda=True, index=0)
    c = {"device": "cuda", "expected_gpu": "RTX-A6000", "gpu_specs": str(path)}
    assert resolve_collect(c, {}, {}, info=card)["expected_gpu"] == "RTX-A6000"
    # the packaged table alone does not know it: the names still match, but no canonical name is recorded
    assert resolve_collect({**c, "gpu_specs": None}, {}, {}, info=card)["expected_gpu"] is None
    with pytest.raises(DeviceStateError):
        resolve_collect({**c, "gpu_specs": None}, {}, {}, info=A100)
