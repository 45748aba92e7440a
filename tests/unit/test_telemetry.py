"""GPU telemetry: the summary over the stable windows, and the reason given where NVML cannot sample."""
from __future__ import annotations

import sys
import types

import pytest

from tritonsuite.load import telemetry
from tritonsuite.load.telemetry import GPU_COLUMNS, GpuSampler


def test_summary_covers_only_the_span_with_mean_and_max(monkeypatch):
    monkeypatch.setattr(telemetry, "_nvml", lambda: "no NVML in this test")
    sampler = GpuSampler()
    sampler.samples = [(0.5, 99.0, 9000.0, 400.0, 1980.0),  # warm-up: outside the span
                       (1.0, 20.0, 1000.0, 100.0, 1000.0),
                       (1.5, 40.0, 1200.0, 300.0, 1500.0),
                       (2.5, 0.0, 0.0, 0.0, 0.0)]  # after the span
    summary = sampler.summary(1.0, 2.0)
    assert list(summary) == list(GPU_COLUMNS)
    assert summary["GPU Utilization (%)"] == {"mean": 30.0, "max": 40.0}
    assert summary["GPU Memory Used (MiB)"] == {"mean": 1100.0, "max": 1200.0}
    assert summary["GPU Power (W)"] == {"mean": 200.0, "max": 300.0}
    assert summary["GPU SM Clock (MHz)"] == {"mean": 1250.0, "max": 1500.0}
    assert sampler.summary(3.0, 4.0) is None


class _FakeNvml(types.SimpleNamespace):
    """NVML's calls as nvidia-ml-py names them, for two devices with fixed readings."""
    NVML_CLOCK_SM = 1

    def nvmlDeviceGetCount(self):
        return 2

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUtilizationRates(self, h):
        return types.SimpleNamespace(gpu=[50, 70][h])

    def nvmlDeviceGetMemoryInfo(self, h):
        return types.SimpleNamespace(used=[1, 3][h] * 2**30)

    def nvmlDeviceGetPowerUsage(self, h):
        return [100_000, 200_000][h]  # milliwatts

    def nvmlDeviceGetClockInfo(self, h, clock):
        assert clock == self.NVML_CLOCK_SM
        return [1400, 1600][h]


def test_sampler_sums_memory_and_power_and_averages_utilisation_and_clock(monkeypatch):
    monkeypatch.setattr(telemetry, "_nvml", lambda: _FakeNvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with GpuSampler(interval_s=0.01) as sampler:
        while len(sampler.samples) < 3:
            pass
    assert sampler.reason is None
    _, util, memory, power, clock = sampler.samples[0]
    assert (util, memory, power, clock) == (60.0, 4096.0, 300.0, 1500.0)


def test_cuda_visible_devices_restricts_the_sampled_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert telemetry._device_indices(_FakeNvml()) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5d1c")  # UUIDs: not mapped, every device is read
    assert telemetry._device_indices(_FakeNvml()) == [0, 1]


def test_reason_without_nvml_and_for_a_remote_server(monkeypatch):
    assert "not on this host" in telemetry.unavailable_reason(server_local=False)
    telemetry._nvml.cache_clear()
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    try:
        assert "nvidia-ml-py is not installed" in telemetry.unavailable_reason()
        with GpuSampler() as sampler:
            pass
        assert sampler.summary(0, float("inf")) is None and "nvidia-ml-py" in sampler.reason
    finally:
        telemetry._nvml.cache_clear()


@pytest.mark.skipif(telemetry.unavailable_reason() is not None, reason="no NVML on this host")
def test_real_gpu_is_described_and_sampled():
    assert "driver" in telemetry.describe_gpus()
    with GpuSampler(interval_s=0.01) as sampler:
        import time
        time.sleep(0.2)
    assert sampler.reason is None and sampler.samples
