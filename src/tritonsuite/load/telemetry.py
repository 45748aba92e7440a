"""GPU telemetry per measured point, with nvidia-ml-py (NVML): utilisation, memory used, power and SM clock of the
GPUs the server runs on, sampled every 100 ms in a thread while the point runs and summarised (mean and max) over
its stable windows.

Only a server on this host can be sampled (NVML reads local devices); elsewhere, and on a host without NVML, the
columns read "-" and :func:`unavailable_reason` says why. The sampler reads the devices NVML lists, restricted to
``CUDA_VISIBLE_DEVICES`` when that holds indices.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from tritonsuite.core.device import _device_indices, _nvml, describe_gpus  # noqa: F401 - describe_gpus re-exported

#: The telemetry columns of a results table, in order; each cell reads "mean / max" over the stable windows.
GPU_COLUMNS = ("GPU Utilization (%)", "GPU Memory Used (MiB)", "GPU Power (W)", "GPU SM Clock (MHz)")
SAMPLE_INTERVAL_S = 0.1


def unavailable_reason(server_local: bool = True) -> str | None:
    if not server_local:
        return "the server is not on this host (NVML reads local GPUs only)"
    nvml = _nvml()
    return nvml if isinstance(nvml, str) else None


@dataclass
class GpuSampler:
    """Samples every GPU the server may use until stopped; ``summary(start, end)`` (``time.perf_counter`` times)
    gives each column's mean and max over the samples in that span, summed over devices for memory and power and
    averaged for utilisation and clock."""

    interval_s: float = SAMPLE_INTERVAL_S
    samples: list[tuple[float, float, float, float, float]] = field(default_factory=list)

    def __post_init__(self):
        self._nvml = _nvml()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reason = self._nvml if isinstance(self._nvml, str) else None

    def __enter__(self) -> "GpuSampler":
        if self.reason is None:
            self._handles = [self._nvml.nvmlDeviceGetHandleByIndex(i) for i in _device_indices(self._nvml)]
            self._thread = threading.Thread(target=self._run, name="tritonsuite-gpu-telemetry", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _read(self) -> tuple[float, float, float, float]:
        nvml, n = self._nvml, len(self._handles)
        util = sum(nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles) / n
        memory = sum(nvml.nvmlDeviceGetMemoryInfo(h).used for h in self._handles) / 2**20
        power = sum(nvml.nvmlDeviceGetPowerUsage(h) for h in self._handles) / 1000.0
        clock = sum(nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM) for h in self._handles) / n
        return util, memory, power, clock

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((time.perf_counter(), *self._read()))
            except Exception as exc:  # a device that stops answering: stop sampling, say why in the row
                self.reason = f"NVML stopped answering ({type(exc).__name__})"
                return
            self._stop.wait(self.interval_s)

    def summary(self, start: float, end: float) -> dict[str, dict[str, float]] | None:
        span = [s[1:] for s in list(self.samples) if start <= s[0] <= end]
        if not span:
            return None
        return {column: {"mean": round(sum(s[i] for s in span) / len(span), 1),
                         "max": round(max(s[i] for s in span), 1)} for i, column in enumerate(GPU_COLUMNS)}
