"""Programs (Poplar's control programs): what the engine runs, lowered by the compiler to steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from profiler.poplar.graph import ComputeSet, Function
from profiler.poplar.streams import DataStream
from profiler.poplar.tensor import Tensor


class Program:
    name: str = ""


@dataclass(eq=False)
class Sequence(Program):
    programs: list[Program] = field(default_factory=list)
    name: str = ""

    def __init__(self, *programs: Program, name: str = "") -> None:
        flat = programs[0] if len(programs) == 1 and isinstance(programs[0], (list, tuple)) else programs
        self.programs = list(flat)
        self.name = name
        for p in self.programs:
            if not isinstance(p, Program):
                raise TypeError(f"Sequence {name!r}: {p!r} is not a program")

    def add(self, program: Program) -> None:
        if not isinstance(program, Program):
            raise TypeError(f"Sequence {self.name!r}: {program!r} is not a program")
        self.programs.append(program)


@dataclass(eq=False)
class Execute(Program):
    """Run every vertex of a compute set (an exchange of remote inputs first, then compute)."""

    compute_set: ComputeSet
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.compute_set, ComputeSet):
            raise TypeError(f"Execute: expected a ComputeSet, got {type(self.compute_set).__name__}")


@dataclass(eq=False)
class Copy(Program):
    """Copy tensor -> tensor, host stream -> tensor, or tensor -> host stream."""

    src: Tensor | DataStream
    dst: Tensor | DataStream
    name: str = ""
    # the debug context the copy is made in (as Poplar's Copy takes a DebugContext); None: the
    # graph's innermost open one, so its steps are the operation's (stream copies included)
    debug_context_id: int | None = None

    def __post_init__(self) -> None:
        for role, x in (("source", self.src), ("destination", self.dst)):
            if not isinstance(x, (Tensor, DataStream)):
                raise TypeError(f"Copy {self.name!r}: {role} must be a Tensor or DataStream, got {type(x).__name__}")
        if self.debug_context_id is None:
            tensor = self.src if isinstance(self.src, Tensor) else self.dst
            self.debug_context_id = tensor.graph.current_debug_context() if isinstance(tensor, Tensor) else -1
        if isinstance(self.src, DataStream) and isinstance(self.dst, DataStream):
            raise TypeError("Copy: cannot copy a stream to a stream")
        s = self.src.numel if isinstance(self.src, DataStream) else self.src.numel()
        d = self.dst.numel if isinstance(self.dst, DataStream) else self.dst.numel()
        if s != d:
            raise ValueError(f"Copy {self.name!r}: source has {s} elements, destination {d}")


@dataclass(eq=False)
class Repeat(Program):
    count: int
    body: Program
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.count, (int, np.integer)) or self.count < 0:
            raise ValueError(f"Repeat {self.name!r}: count must be an integer >= 0, got {self.count!r}")
        if not isinstance(self.body, Program):
            raise TypeError(f"Repeat {self.name!r}: body must be a program, got {type(self.body).__name__}")


@dataclass(eq=False)
class If(Program):
    """Run ``then`` if the (single-element) ``condition`` tensor is non-zero, else ``otherwise``."""

    condition: Tensor
    then: Program
    otherwise: Program = field(default_factory=Sequence)
    name: str = ""

    def __post_init__(self) -> None:
        if self.condition.numel() != 1:
            raise ValueError(f"If {self.name!r}: condition must have one element, got shape {self.condition.shape}")


@dataclass(eq=False)
class Switch(Program):
    """Run ``cases[value]`` for the (single-element, integer) ``control`` tensor's value, else ``default``."""

    control: Tensor
    cases: dict[int, Program]
    default: Program = field(default_factory=Sequence)
    name: str = ""

    def __post_init__(self) -> None:
        if self.control.numel() != 1 or self.control.dtype.kind not in "iu":
            raise ValueError(f"Switch {self.name!r}: control must be one integer element, got {self.control!r}")


@dataclass(eq=False)
class Sync(Program):
    """Synchronise tiles: "internal" (one IPU) or "external" (all IPUs)."""

    kind: str = "internal"
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("internal", "external"):
            raise ValueError(f"Sync: kind must be 'internal' or 'external', got {self.kind!r}")


@dataclass(eq=False)
class WriteUndef(Program):
    """Mark a tensor's contents undefined (ends its liveness until next written); a sequence of
    tensors is marked in one step (as Poplar would the concatenation, without building it)."""

    tensor: Tensor | tuple[Tensor, ...]
    name: str = ""


@dataclass(eq=False)
class Call(Program):
    function: Function
    name: str = ""


@dataclass(eq=False)
class PrintTensor(Program):
    """Print a tensor on the host (a device-to-host stream copy, as in Poplar)."""

    title: str
    tensor: Tensor
    name: str = ""


def compute_sets_run(program: Program) -> set[int]:
    """Ids of the compute sets ``program`` can execute (through every branch, loop and call)."""
    found: set[int] = set()
    stack: list[Any] = [program]
    seen: set[int] = set()
    while stack:
        p = stack.pop()
        if id(p) in seen:
            continue
        seen.add(id(p))
        if isinstance(p, Execute):
            found.add(p.compute_set.id)
        elif isinstance(p, Sequence):
            stack.extend(p.programs)
        elif isinstance(p, Repeat):
            stack.append(p.body)
        elif isinstance(p, If):
            stack.extend((p.then, p.otherwise))
        elif isinstance(p, Switch):
            stack.extend((*p.cases.values(), p.default))
        elif isinstance(p, Call):
            stack.append(p.function.program)
    return found
