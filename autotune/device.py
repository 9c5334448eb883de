"""Device detection and telemetry, through torch and NVML, degrading cleanly without them.

Example:
    >>> info = detect_device()
    >>> info.type in ("cuda", "cpu")
    True
    >>> "max_shared_memory" in info.as_dict()
    True
"""

from __future__ import annotations

import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

# Shared memory per block (opt-in maximum) by compute capability, used when neither torch nor
# Triton can tell. Hopper (9.0): 227 KiB; Ampere A100 (8.0): 163 KiB; Ada/consumer Ampere: 99 KiB.
_SMEM_BY_CC = {(9, 0): 232448, (8, 0): 166912, (8, 6): 101376, (8, 9): 101376, (7, 5): 65536}
# Under the Triton interpreter there is no shared memory; constraints use the Hopper limit so that
# a sweep on the CPU rejects the same configs it would reject on an H100/H200.
_CPU_EMULATED_SMEM = 232448


@dataclass
class DeviceInfo:
    """What the tuner knows about the device a trial runs on."""

    type: str  # "cuda" or "cpu"
    name: str
    index: int = 0
    total_memory: int = 0  # bytes
    multiprocessors: int = 0  # SMs on CUDA, cores on CPU
    compute_capability: str = ""
    max_shared_memory: int = _CPU_EMULATED_SMEM  # bytes per block
    driver: str = ""
    nvml: bool = False
    software: dict[str, str] = field(default_factory=dict)
    count: int = 1  # devices of this kind visible to this process (GPUs; 1 for the CPU)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def key(self) -> str:
        """Short fingerprint used to key stored results: device name and capability."""
        cc = f" sm_{self.compute_capability.replace('.', '')}" if self.compute_capability else ""
        return f"{self.name}{cc}"


def software_versions() -> dict[str, str]:
    """Versions of the toolchain that a measurement depends on."""
    versions = {"python": platform.python_version()}
    for module in ("torch", "triton", "optuna"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - an absent or broken package is simply not listed
            continue
    try:
        import torch

        if torch.version.cuda:
            versions["cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001
        pass
    return versions


def _nvml_handle(index: int):
    import pynvml

    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "cpu"


@lru_cache(maxsize=4)
def detect_device(prefer: str = "auto", index: int = 0) -> DeviceInfo:
    """Describe the device trials will run on: the CUDA GPU ``index`` if present, else the CPU.

    Args:
        prefer: "auto" (CUDA when available), "cuda" or "cpu".
        index: which CUDA device.
    """
    import torch

    if prefer != "cpu" and torch.cuda.is_available():
        props = torch.cuda.get_device_properties(index)
        cc = (props.major, props.minor)
        smem = getattr(props, "shared_memory_per_block_optin", 0) or _SMEM_BY_CC.get(cc, 49152)
        info = DeviceInfo(
            type="cuda",
            name=props.name,
            index=index,
            total_memory=int(props.total_memory),
            multiprocessors=int(props.multi_processor_count),
            compute_capability=f"{props.major}.{props.minor}",
            max_shared_memory=int(smem),
            software=software_versions(),
            count=torch.cuda.device_count(),
        )
        try:
            pynvml, handle = _nvml_handle(index)
            info.driver = pynvml.nvmlSystemGetDriverVersion()
            info.nvml = True
        except Exception:  # noqa: BLE001 - NVML absent or refused: keep what torch told
            pass
        return info
    if prefer == "cuda":
        raise RuntimeError("CUDA was asked for but torch sees no CUDA device")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return DeviceInfo(
        type="cpu",
        name=_cpu_name(),
        total_memory=int(total),
        multiprocessors=os.cpu_count() or 1,
        software=software_versions(),
    )


def read_telemetry(index: int = 0) -> dict[str, Any]:
    """Clocks, power, temperature and throttle reasons of GPU ``index`` now, from NVML.

    Returns an empty dict where NVML is absent (CPU machines), so callers need no special case.

    Example:
        >>> isinstance(read_telemetry(), dict)
        True
    """
    try:
        pynvml, handle = _nvml_handle(index)
    except Exception:  # noqa: BLE001 - pynvml.NVMLError (LibraryNotFound) on CPU machines
        return {}
    readings: dict[str, Any] = {}
    probes = {
        "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
        "power_w": lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "temperature_c": lambda: pynvml.nvmlDeviceGetTemperature(
            handle, pynvml.NVML_TEMPERATURE_GPU
        ),
        "throttle_reasons": lambda: hex(
            pynvml.nvmlDeviceGetCurrentClocksEventReasons(handle)
            if hasattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons")
            else pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        ),
    }
    for key, probe in probes.items():
        try:
            readings[key] = probe()
        except Exception:  # noqa: BLE001 - one unsupported query must not hide the others
            continue
    return readings


def visible_gpu_ids(count: int) -> list[str]:
    """The ids that pin a child process to each of the ``count`` GPUs this process sees
    (values for its ``CUDA_VISIBLE_DEVICES``), honouring this process's own setting.

    Example:
        >>> import os
        >>> os.environ["CUDA_VISIBLE_DEVICES"] = "2,3"
        >>> visible_gpu_ids(2)
        ['2', '3']
        >>> del os.environ["CUDA_VISIBLE_DEVICES"]
        >>> visible_gpu_ids(2)
        ['0', '1']
    """
    inherited = os.environ.get("CUDA_VISIBLE_DEVICES")
    if inherited is not None:
        ids = [part.strip() for part in inherited.split(",") if part.strip()]
        return ids[:count]
    return [str(i) for i in range(count)]
