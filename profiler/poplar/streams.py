"""Host data streams (Poplar FIFOs): one transfer moves ``shape`` elements between host and device."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

HOST_TO_DEVICE = "host_to_device"
DEVICE_TO_HOST = "device_to_host"


@dataclass(frozen=True, eq=False)
class DataStream:
    id: int
    name: str
    direction: str  # HOST_TO_DEVICE or DEVICE_TO_HOST
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return int(math.prod(self.shape))  # not np.prod: ~5 us, at each stream copy of a run

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"DataStream({self.name!r}, {self.direction}, {self.dtype.name}{list(self.shape)})"
