"""Dense bf16 peak throughput of known GPUs: the denominator of every MFU figure.

MFU is always model FLOPs per second over the device's dense (no 2:4 sparsity) bf16 tensor
peak from its datasheet, whatever precision the run used, so that an fp32 run is not flattered
by fp32's lower peak. Keyed on the device name as NVML and torch report it; variants with a
different peak (H100 PCIe and NVL against SXM) are told apart, and an unknown device has no
peak (its MFU is not given, and the run says why).

Example:
    >>> bf16_peak_flops("NVIDIA H100 80GB HBM3")
    989000000000000.0
    >>> bf16_peak_flops("NVIDIA H100 PCIe"), bf16_peak_flops("NVIDIA A10G")
    (756000000000000.0, None)
"""

from __future__ import annotations

import re

#: (pattern on the device name, dense bf16 TFLOP/s), first match wins: specific variants first.
BF16_PEAKS_TFLOPS: tuple[tuple[str, float], ...] = (
    (r"\bH200 NVL\b", 835.0),
    (r"\bH200\b", 989.0),  # SXM
    (r"\bGH200\b", 989.0),
    (r"\bH100 NVL\b", 835.0),
    (r"\bH100 PCIe\b", 756.0),
    (r"\bH100\b", 989.0),  # SXM ("NVIDIA H100 80GB HBM3")
    (r"\bH800\b", 989.0),
    (r"\bB200\b", 2250.0),
    (r"\bA100\b", 312.0),
    (r"\bA800\b", 312.0),
    (r"\bL40S\b", 362.0),
    (r"\bL40\b", 181.0),
    (r"\bL4\b", 121.0),
    (r"\bA10\b", 125.0),  # not the A10G, whose peak NVIDIA does not publish
    (r"\bRTX 4090\b", 165.0),  # with fp32 accumulation
)


def bf16_peak_flops(device_name: str) -> float | None:
    """The device's dense bf16 peak in FLOP/s, or None for a device not in the table."""
    for pattern, tflops in BF16_PEAKS_TFLOPS:
        if re.search(pattern, device_name):
            return tflops * 1e12
    return None
