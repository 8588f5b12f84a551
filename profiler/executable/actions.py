"""What the engine does at a program step: the compiler hands it one of these typed actions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from profiler.executable.access import Access
from profiler.poplar.streams import DataStream

if TYPE_CHECKING:
    from profiler.executable.plans import ComputeSetPlan


@dataclass(frozen=True, eq=False)
class Execute:
    """Run a compute set: its kernel, or every vertex batch (``tilescope.executeVertices``)."""

    plan: ComputeSetPlan


@dataclass(frozen=True, eq=False)
class Copy:
    """Copy one tensor's values to another (on-IPU or global exchange)."""

    src: Access
    dst: Access


@dataclass(frozen=True, eq=False)
class FromHost:
    """A host-to-device stream copy into ``dst``."""

    stream: DataStream
    dst: Access


@dataclass(frozen=True, eq=False)
class ToHost:
    """A device-to-host stream copy of ``src``."""

    stream: DataStream
    src: Access


@dataclass(frozen=True, eq=False)
class Print:
    """PrintTensor: the host prints a tensor's values under a title."""

    title: str
    src: Access


Action = Execute | Copy | FromHost | ToHost | Print
