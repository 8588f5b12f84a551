"""The simulated IPU: targets, graph API, compiler, BSP engine, capture."""

from profiler.capture.options import OptionError, resolve_options
from profiler.chip.codelets import BUILTIN_CODELETS, Codelet
from profiler.chip.targets import Target, get_target, ipu_model
from profiler.compiler.compile import CompileError
from profiler.engine.engine import Engine, EngineError, OutOfMemoryError
from profiler.host.allocator import keep_freed_memory
from profiler.host.host_memory import HostMemoryError
from profiler.poplar.graph import ComputeSet, Graph, GraphError
from profiler.poplar.programs import (
    Call,
    Copy,
    Execute,
    If,
    PrintTensor,
    Program,
    Repeat,
    Sequence,
    Switch,
    Sync,
    WriteUndef,
)
from profiler.poplar.streams import DataStream
from profiler.poplar.tensor import Tensor, concat

keep_freed_memory()  # before the first large allocation (see profiler.host.allocator)

__all__ = [
    "BUILTIN_CODELETS",
    "Call",
    "Codelet",
    "CompileError",
    "ComputeSet",
    "Copy",
    "DataStream",
    "Engine",
    "EngineError",
    "Execute",
    "Graph",
    "GraphError",
    "HostMemoryError",
    "If",
    "OptionError",
    "OutOfMemoryError",
    "PrintTensor",
    "Program",
    "Repeat",
    "Sequence",
    "Switch",
    "Sync",
    "Target",
    "Tensor",
    "WriteUndef",
    "concat",
    "get_target",
    "ipu_model",
    "resolve_options",
]
