"""Read-only device description and the expected-device check."""

from __future__ import annotations

import pytest
from test_emulation_backends import FakeNvml

from traintime.core.errors import DeviceStateError, UnknownNameError
from traintime.measure.device import DeviceInfo, check_expected_device, describe_device


def gpu(name: str) -> DeviceInfo:
    return DeviceInfo(name=name, is_cuda=True, index=0, sms=170, compute_capability="12.0")


def test_expected_device_matches_through_aliases():
    assert check_expected_device("RTX 5090", info=gpu("NVIDIA GeForce RTX 5090")) == "RTX-5090"
    assert check_expected_device("NVIDIA_GeForce_RTX_5090", info=gpu("NVIDIA GeForce RTX 5090")) == "RTX-5090"


def test_a_different_gpu_is_refused():
    with pytest.raises(DeviceStateError, match=r"expected to measure on GPU 'RTX-5090'.*'NVIDIA GeForce RTX 4070'"):
        check_expected_device("RTX-5090", info=gpu("NVIDIA GeForce RTX 4070"))


def test_no_cuda_or_unknown_device_is_refused():
    with pytest.raises(DeviceStateError, match="no CUDA device"):
        check_expected_device("RTX-5090", info=DeviceInfo(name="cpu", is_cuda=False))
    with pytest.raises(DeviceStateError, match="not in the GPU spec table"):
        check_expected_device("RTX-5090", info=gpu("Imaginary GPU 9000"))


def test_unknown_expected_gpu_is_a_name_error():
    with pytest.raises(UnknownNameError, match="RTX 5909"):
        check_expected_device("RTX 5909", info=gpu("NVIDIA GeForce RTX 5090"))


def test_describe_device_on_this_machine():
    import torch

    info = describe_device(nvml=False)
    if torch.cuda.is_available():  # pragma: no cover - GPU machines only
        pytest.skip("a CUDA device is present: see test_describe_device_on_cuda")
    assert info.name == "cpu" and not info.is_cuda and info.sms is None
    assert info.torch_version == torch.__version__


@pytest.mark.gpu
def test_describe_device_on_cuda():
    import torch

    info = describe_device(nvml=False)
    assert info.is_cuda and info.sms and info.compute_capability
    assert info.sms == torch.cuda.get_device_properties(0).multi_processor_count


def test_describe_device_from_nvml_only_reads():
    nv = FakeNvml(max_clock=2407)
    info = describe_device(nvml=nv, init_cuda=False)
    assert info.name == "NVIDIA GeForce RTX 5090" and info.is_cuda
    assert info.max_sm_clock_mhz == 2407 and info.driver_version == "999.1"
    assert not any(c[0] in ("lock", "reset") for c in nv.calls)  # read-only


def test_cc_tuple():
    assert gpu("x").cc_tuple == (12, 0)
    assert DeviceInfo(name="cpu", is_cuda=False).cc_tuple is None
