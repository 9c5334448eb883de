"""MFU's denominator: the dense bf16 peak of the device, told apart by variant."""

import pytest

from autotune.device_peaks import bf16_peak_flops


@pytest.mark.parametrize(
    ("name", "tflops"),
    [
        ("NVIDIA H200", 989.0),
        ("NVIDIA H200 NVL", 835.0),
        ("NVIDIA H100 80GB HBM3", 989.0),  # SXM
        ("NVIDIA H100 PCIe", 756.0),
        ("NVIDIA H100 NVL", 835.0),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.0),
        ("NVIDIA L4", 121.0),
        ("NVIDIA A10", 125.0),
    ],
)
def test_known_devices(name, tflops):
    assert bf16_peak_flops(name) == tflops * 1e12


@pytest.mark.parametrize("name", ["NVIDIA A10G", "AMD EPYC 7B13", "cpu", "NVIDIA L400"])
def test_unknown_devices_have_no_peak(name):
    assert bf16_peak_flops(name) is None
