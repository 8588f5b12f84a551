"""The simulated IPU: targets, graph API, compiler, BSP engine, capture."""

from profiler.allocator import keep_freed_memory
from profiler.codelets import BUILTIN_CODELETS, Codelet
from profiler.compile import CompileError
from profiler.engine import Engine, EngineError, OutOfMemoryError
from profiler.graph import ComputeSet, Graph, GraphError
from profiler.host_memory import HostMemoryError
from profiler.options import OptionError, resolve_options
from profiler.programs import Call, Copy, Execute, If, PrintTensor, Program, Repeat, Sequence, Switch, Sync, WriteUndef
from profiler.streams import DataStream
from profiler.targets import Target, get_target, ipu_model
from profiler.tensor import Tensor, concat

keep_freed_memory()  # before the first large allocation (see profiler.allocator)

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
