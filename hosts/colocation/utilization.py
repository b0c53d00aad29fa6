"""How busy the device was while a method ran (CoGNN Fig. 9's SM utilisation).

CUDA: NVML's utilisation (the share of the last sample period in which any
kernel ran), sampled every ``period_s`` and averaged; None where NVML is not
installed. CPU: the share of the cores' time spent busy between start and stop,
from ``/proc/stat`` (all processes on the machine: on a shared box that
includes others' work, which is why it is recorded, not asserted on).
"""
from __future__ import annotations

import threading

import torch

from hosts.procstat import BoxTimes, box_times, idle_and_stolen_shares


class UtilizationSampler:
    def __init__(self, device: torch.device, period_s: float = 0.2):
        self.device = device
        self.period_s = period_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu_start: BoxTimes | None = None
        self.mean: float | None = None  # a share in [0, 1], after stop()

    def start(self) -> None:
        if self.device.type == "cuda":
            if self._read_gpu() is not None:
                self._thread = threading.Thread(target=self._sample, name="utilization", daemon=True)
                self._thread.start()
        else:
            self._cpu_start = box_times()

    def stop(self) -> float | None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.mean = sum(self._samples) / len(self._samples) if self._samples else None
        elif self._cpu_start is not None:
            now = box_times()
            self.mean = 1 - idle_and_stolen_shares(self._cpu_start, now)[0] if now.total > self._cpu_start.total else None
        return self.mean

    def _read_gpu(self) -> float | None:
        try:
            return torch.cuda.utilization(self.device) / 100.0
        except Exception:  # noqa: BLE001 - no NVML (pynvml) or no permission: no figure, not a failed run
            return None

    def _sample(self) -> None:
        while not self._stop.wait(self.period_s):
            value = self._read_gpu()
            if value is not None:
                self._samples.append(value)
