"""Device detection and telemetry, through torch and NVML, degrading cleanly without them.

A machine with no GPU runtime at all (no NVIDIA, ROCm or WSL GPU device) is described without
importing torch (about 2 s of CPU per process): what torch would say there is known, the CPU.

Example:
    >>> info = detect_device()
    >>> info.type in ("cuda", "cpu")
    True
    >>> "max_shared_memory" in info.as_dict()
    True
"""

from __future__ import annotations

import glob
import os
import platform
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from autotune.software_versions import declared_versions, software_versions

# Shared memory per block (opt-in maximum) by compute capability, used when neither torch nor
# Triton can tell. Hopper (9.0): 227 KiB; Ampere A100 (8.0): 163 KiB; Ada/consumer Ampere: 99 KiB.
_SMEM_BY_CC = {(9, 0): 232448, (8, 0): 166912, (8, 6): 101376, (8, 9): 101376, (7, 5): 65536}
# Under the Triton interpreter there is no shared memory; constraints use the Hopper limit so that
# a sweep on the CPU rejects the same configs it would reject on an H100/H200.
_CPU_EMULATED_SMEM = 232448
#: where a GPU runtime shows itself to a process: NVIDIA's device nodes and loaded driver, ROCm's
#: kernel driver (torch's ROCm build answers torch.cuda), WSL's GPU paravirtualisation (CUDA on
#: WSL has no /dev/nvidia*); where none matches, torch can see no GPU
_GPU_RUNTIME_PATHS = ("/dev/nvidia*", "/proc/driver/nvidia", "/dev/kfd", "/dev/dxg")


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


def _no_gpu_runtime() -> bool:
    """Whether this machine certainly has no GPU that torch could see: none of
    :data:`_GPU_RUNTIME_PATHS` exists, and no GPU driver's library is installed (NVIDIA's
    ``libcuda`` can load its kernel module and make the device nodes at a process's first
    CUDA call, on a host that made none yet; ROCm's ``libamdhip64`` likewise)."""
    if any(glob.glob(pattern) for pattern in _GPU_RUNTIME_PATHS):
        return False
    import ctypes.util

    return not any(ctypes.util.find_library(name) for name in ("cuda", "amdhip64"))


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
    if prefer == "cpu" or (prefer == "auto" and _no_gpu_runtime()):
        software = declared_versions()
        if software is not None:  # what torch would say here, without importing it
            return _cpu_info(software)
    return _detect_with_torch(prefer, index)


def _detect_with_torch(prefer: str, index: int) -> DeviceInfo:
    """:func:`detect_device`, asking torch whether a CUDA device is there."""
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
    return _cpu_info(software_versions())


def host_memory_bytes() -> int:
    """This machine's physical memory in bytes (the CPU's, whatever device trials run on); 0
    where it cannot be read.

    Example:
        >>> host_memory_bytes() > 0
        True
    """
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError):
        return 0


def _cpu_info(software: dict[str, str]) -> DeviceInfo:
    """This machine's CPU as the device, with the toolchain's versions ``software``."""
    total = host_memory_bytes()
    return DeviceInfo(
        type="cpu",
        name=_cpu_name(),
        total_memory=int(total),
        multiprocessors=os.cpu_count() or 1,
        software=software,
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
