"""The one place that decides devices: where an export runs, whether this host has CUDA, what the report's GPU row
says. Profiles say ``device: cpu|gpu``; instance groups follow as ``KIND_CPU``/``KIND_GPU``.
"""
from __future__ import annotations

import os
import platform
from functools import lru_cache
from pathlib import Path

INSTANCE_KINDS = {"cpu": "KIND_CPU", "gpu": "KIND_GPU"}  # profile device -> Triton instance group kind


@lru_cache(maxsize=None)
def cuda_available() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def export_device(precision: str) -> str:
    """fp16 exports are built and verified on CUDA where the host has it (the device they serve on); on a CPU host
    on the CPU, where torch 2.13 runs fp16 convolutions, normalisations and LSTMs (so reduced-precision numerics
    are tested in CPU CI). fp32 exports are built on the CPU."""
    return "cuda" if precision != "fp32" and cuda_available() else "cpu"


def unavailable_reason(precision: str) -> str | None:
    """Why this host cannot export ``precision``, or None (every precision exports on CPU or CUDA)."""
    return None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_description(profile_device: str, profile_gpu: str, server_local: bool) -> str:
    """The report's GPU row: the device the server runs on where it can be known here, else what the profile
    names."""
    if profile_device == "cpu":
        return f"none (CPU: {cpu_name()})"
    if server_local:
        described = describe_gpus()
        if described:
            return described
        if cuda_available():
            import torch

            return torch.cuda.get_device_name(0)
    return f"{profile_gpu} (as the profile names it; the server is not on this host)"


def host_description(server_local: bool = True) -> str:
    """The hardware a local server's figures come from, as runs are joined by it (tritonsuite.judge.compare): the CPU,
    its core count, and the GPUs NVML sees ("AMD EPYC 7B13, 2 cores")."""
    text = f"{cpu_name()}, {os.cpu_count()} cores"
    gpus = describe_gpus() if server_local else None
    return f"{text}, {gpus.split(' (driver')[0]}" if gpus else text


# ------------------------------------------------------- NVML: the GPUs this host has (load.telemetry samples them)
@lru_cache(maxsize=None)
def _nvml():
    """The initialised ``pynvml`` module, or the reason there is none (a string)."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install -e '.[gpu]')"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, ...
        return f"NVML does not start on this host ({type(exc).__name__})"
    return pynvml


def _device_indices(nvml) -> list[int]:
    count = nvml.nvmlDeviceGetCount()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and all(p.strip().isdigit() for p in visible.split(",") if p.strip()):
        return [int(p) for p in visible.split(",") if p.strip() and int(p) < count]
    return list(range(count))


def describe_gpus() -> str | None:
    """The GPUs NVML sees, with driver and CUDA driver versions ("NVIDIA H100 80GB HBM3 (driver 580.159.04, CUDA
    13.0)"), or None without NVML."""
    nvml = _nvml()
    if isinstance(nvml, str):
        return None
    names = [_text(nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(i))) for i in _device_indices(nvml)]
    if not names:
        return None
    cuda = nvml.nvmlSystemGetCudaDriverVersion()
    return (f"{', '.join(names)} (driver {_text(nvml.nvmlSystemGetDriverVersion())}, "
            f"CUDA {cuda // 1000}.{cuda % 1000 // 10})")


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
