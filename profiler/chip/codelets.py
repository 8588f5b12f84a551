"""Codelets: built-in ones (run vectorised over every vertex of a batch) and user ones in Python.

A codelet knows its fields (read, written, read-written), how to compute, its cycle and FLOP
estimates (from ``profiler.chip.cost_model``, PopLibs' conventions) and its code size. Built-in codelets
execute one numpy kernel per batch of vertices; a user codelet's ``compute`` runs per vertex (the
slower path Poplar tutorials use for custom vertices).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from profiler.chip import cost_model
from profiler.chip.targets import Target

# Vertex instance state (ref §5 "Vertex-state field sizes", Poplar user guide vector layouts): a
# SPAN field is a pointer plus a 32-bit count = 8 bytes; ONE_PTR a pointer only, 4 bytes [INF: a
# 21-bit address in a 32-bit word]; SCALED_PTR32/64/128 and COMPACT_PTR compressed 16-bit pointers,
# 2 bytes [INF]. A generic codelet's fields are SPANs; plus [INF] 4 bytes per vertex for the
# vertex's code pointer. PopLibs vertices whose field layouts are public (ConvPartial1x1Out,
# poplin::ReduceAdd) give their own layouts through ``vertex_state_bytes``.
# The state is the vertex's fixed-size struct: a ``Vector<Input<Vector<T>>, ONE_PTR>`` field is one
# pointer in it (PopLibs' assembly reads such a field as one word at a fixed offset and then steps
# through the array it points to), so the array of inner pointers is stored out of line. Poplar's
# category for out-of-line field data is vertexFieldData ([INF]: the category names it; no document
# says which fields fill it), kept apart as the profiler tests of PopLibs themselves count it
# (tests/popops/DynamicSliceTest.cpp: vertex state = vertexInstanceState + copyDescriptor +
# vectorListDescriptor + vertexFieldData).
VERTEX_STATE_BYTES_PER_FIELD = 8
VERTEX_STATE_HEADER_BYTES = 4
ONE_PTR_BYTES = 4
SCALED_PTR_BYTES = 2
# [INF] vertex state is a struct of 32-bit words: each vertex's state is padded to 4 bytes.
VERTEX_STATE_ALIGN = 4


class VertexBytes(NamedTuple):
    """Bytes one vertex puts on its tile besides its codelet's code."""

    state: int  # its instance state: the vertex's fixed-size struct (vertexInstanceState)
    field_data: int = 0  # out of line: the pointer arrays of Vector<Input<Vector<T>>> fields (vertexFieldData)
    constant: int = 0  # graph constants its fields connect to (PopLibs' conv worklists; category constant)


# A SPAN vector field: a pointer and its 32-bit count (see above).
SPAN_BYTES = 8


def elementwise_state_bytes(inputs: int, in_place: bool = False) -> int:
    """Vertex state of a popops elementwise 1D MultiVertex (``UnaryOp1D``, ``BinaryOp1D``, their
    InPlace forms): each input a ONE_PTR pointer, the output (or the in-place operand) a SPAN, no
    header. ``inputs`` counts the in-place operand. graphcore/poplibs
    lib/popops/codelets/elemwiseBinaryCodelets.cpp (``Input<Vector<T, ONE_PTR, 8>> in1, in2;
    Output<Vector<outputType, SPAN, 8>> out``) and the offsets asm/binaryOps1D.S and asm/unaryOps1D.S
    read: binary 16 B (in1 0, in2 4, out 8, count 12), in place 12 B; unary 12 B, in place 8 B."""
    pointers = inputs - 1 if in_place else inputs
    return vertex_state_bytes(one_ptr=pointers) + SPAN_BYTES


def vertex_state_bytes(*, scaled: int = 0, one_ptr: int = 0, shorts: int = 0, words: int = 0) -> int:
    """Bytes of one vertex's state: ``scaled`` 16-bit compressed pointers, ``one_ptr`` 32-bit
    pointers, ``shorts`` 16-bit scalars and ``words`` 32-bit scalars (out-of-line vectors of
    pointers and worklists included), padded to 4 bytes; no header (PopLibs vertices)."""
    raw = SCALED_PTR_BYTES * scaled + ONE_PTR_BYTES * one_ptr + 2 * shorts + 4 * words
    return -(-raw // VERTEX_STATE_ALIGN) * VERTEX_STATE_ALIGN


# [INF] ref §5: vertexCode is about 3.4 MiB over 1472 tiles (~2.4 KiB per tile) for a dense layer
# using a handful of codelets, so a few hundred bytes per simple codelet; matmul kernels are larger.
# PopLibs' AMP and ReduceAdd codelets have sizes counted from their assembly instead
# (ops.poplibs_codelets.AMP_CODE_BYTES: 0.8-1.2 KiB; REDUCE_ADD_CODE_BYTES: 224-424 B), which bear
# these two out; the rest keep them.
SIMPLE_CODE_BYTES = 256
MATMUL_CODE_BYTES = 1024


class Codelet:
    """Base of all codelets. A user codelet subclasses it and defines ``compute`` per vertex:

    class Sum(Codelet):
        name = "Sum"; inputs = ("in",); outputs = ("out",)
        def compute(self, **f): return {"out": f["in"].sum(keepdims=True)}
        def cycle_estimate(self, **shapes): return 10 + shapes["in"][0]
    """

    name: str = "Codelet"
    kind: str = "Vertex"  # Vertex (one worker), MultiVertex (all workers) or SupervisorVertex
    builtin: bool = False
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    inouts: tuple[str, ...] = ()
    code_bytes: int = SIMPLE_CODE_BYTES
    # run_batch looks at its outputs' old values; a codelet that only needs their shape and dtype
    # sets False, and the engine passes uninitialised arrays instead of gathering them
    reads_outputs: bool = True
    # every field has one shape and element i of each result depends only on element i of the
    # operands: the engine may walk the fields in any one order (it takes the result's storage order)
    positionwise: bool = False
    # a field this codelet can take as the strided view of its convolution windows
    # (``access.windows``: [G, B.., Ho, Wo, C.., kh, kw]) rather than as copied columns: when that
    # field reads a Window, the engine calls ``run_windows`` with it instead of ``run_batch``
    window_field: str | None = None
    # a field whose rows decide the same rows of every output and nothing else does (a matmul's
    # lhs: out[g, rows] = a[g, rows] @ b[g]): the engine may compute an output in parts of rows,
    # each part's columns, product and result written on one thread (``profiler.engine.batch_run``)
    rows_field: str | None = None
    # an elementwise op ``profiler.executable.half_maps`` may run on stored halves in one compiled pass (when
    # every field is half and the result is another variable): a name in half_maps.LOOPS
    half_op: str | None = None
    # the elementwise op a ``Map`` performs whether in place or not (half_op's names, and "cast"):
    # a step of a chain (``profiler.executable.elementwise_chains``)
    chain_op: str | None = None
    # why this codelet's real cycles depend on the data it reads ("" when they do not): the cost
    # model charges it one estimate whatever the values, and the report says so per step
    data_dependent: str = ""

    # -- user codelet hooks (per vertex) ------------------------------------------------------
    def compute(self, **fields: np.ndarray) -> Mapping[str, np.ndarray] | None:
        raise NotImplementedError(f"codelet {self.name} has no compute()")

    def cycle_estimate(self, **shapes: tuple[int, ...]) -> int:
        return 0

    def flop_estimate(self, **shapes: tuple[int, ...]) -> int:
        return 0

    # -- used by the compiler and engine --------------------------------------------------
    @property
    def fields(self) -> tuple[str, ...]:
        return self.inputs + self.inouts + self.outputs

    @property
    def reads(self) -> tuple[str, ...]:
        return self.inputs + self.inouts

    @property
    def writes(self) -> tuple[str, ...]:
        return self.inouts + self.outputs

    def read_dtypes(self, dtypes: Mapping[str, np.dtype]) -> Mapping[str, np.dtype]:
        """The type each field is read in, from the types it is stored in: the engine converts while
        it gathers (one pass, fused with the gather's copy) rather than the codelet after it."""
        return dtypes

    @property
    def multi_worker(self) -> bool:
        return self.kind != "Vertex"

    def vertex_bytes(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> VertexBytes:
        """What one vertex with these field shapes puts on its tile besides its code: its instance
        state (a SPAN per field and a header by default), out-of-line field data and graph constants."""
        return VertexBytes(VERTEX_STATE_HEADER_BYTES + VERTEX_STATE_BYTES_PER_FIELD * len(self.fields))

    def code_size(self, dtypes: Mapping[str, np.dtype], target: Target) -> int:
        """Bytes of machine code of this codelet's type with these field types (vertexCode, once per
        tile that runs it); ``code_bytes`` unless a codelet knows its variants' sizes."""
        return self.code_bytes

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return self.name

    def check_fields(self, where: str, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
        missing = [f for f in self.fields if f not in shapes]
        extra = [f for f in shapes if f not in self.fields]
        if missing or extra:
            raise ValueError(
                f"compute set {where!r}: codelet {self.name} needs fields {list(self.fields)}; "
                f"missing {missing or 'none'}, unknown {extra or 'none'}"
            )

    def run_windows(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """``run_batch`` with ``values[window_field]`` the windows view (see ``window_field``)."""
        raise NotImplementedError(f"codelet {self.name} has no run_windows()")

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Compute every vertex of a batch: values[f] has one row per vertex; returns written fields."""
        out = {f: values[f].copy() for f in self.writes}
        for v in range(next(iter(values.values())).shape[0]):
            row = {f: (out[f][v] if f in out else values[f][v].copy()) for f in self.fields}
            result = self.compute(**row, **params) or {}
            for f in self.writes:
                out[f][v] = result.get(f, row[f])
        return out

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        """(cycles, FLOPs) of one vertex whose fields have ``shapes`` (PopLibs cycle convention)."""
        return int(self.cycle_estimate(**shapes)), int(self.flop_estimate(**shapes))


def _n(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Elementwise(Codelet):
    builtin = True
    kind = "MultiVertex"
    reads_outputs = False  # only out's dtype
    positionwise = True

    def __init__(self, name: str, op: str, fn: Callable[..., np.ndarray], arity: int) -> None:
        self.name, self.op, self.fn, self.arity = name, op, fn, arity
        self.inputs = ("in",) if arity == 1 else ("in1", "in2")
        self.outputs = ("out",)

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}<{dtypes['out'].name}>"

    def check_fields(self, where: str, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
        super().check_fields(where, shapes, params)
        if len({shapes[f] for f in self.fields}) != 1:
            raise ValueError(f"compute set {where!r}: {self.name} fields must have equal shapes, got {dict(shapes)}")

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        dt = values["out"].dtype
        with np.errstate(all="ignore"):
            return {"out": self.fn(*(values[f] for f in self.inputs)).astype(dt, copy=False)}

    def vertex_bytes(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> VertexBytes:
        return VertexBytes(elementwise_state_bytes(self.arity))

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        n, dt = _n(shapes["out"]), dtypes["out"]
        if self.arity == 1:
            return int(cost_model.unary_cycles(self.op, n, dt, target)), int(cost_model.unary_flops(self.op, n, dt))
        return int(cost_model.binary_cycles(self.op, n, dt, target)), int(cost_model.binary_flops(self.op, n, dt))


class _ScaledAdd(Codelet):
    name = "popops::ScaledAdd"
    builtin = True
    kind = "MultiVertex"
    inputs = ("deltas",)
    inouts = ("data",)

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}<{dtypes['data'].name}>"

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        scale = params.get("scale", 1.0)
        data = values["data"]
        return {"data": (data + scale * values["deltas"]).astype(data.dtype, copy=False)}

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        n, dt = _n(shapes["data"]), dtypes["data"]
        return int(cost_model.scaled_add_cycles(n, dt, target)), int(cost_model.scaled_add_flops(n, dt))


class _Fill(Codelet):
    name = "popops::Fill"
    builtin = True
    kind = "Vertex"  # PopLibs' Fill is a worker vertex (cost_model.fill_cycles)
    outputs = ("out",)

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}<{dtypes['out'].name}>"

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = values["out"]
        return {"out": np.full(out.shape, params.get("value", 0), dtype=out.dtype)}

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        return int(cost_model.fill_cycles(_n(shapes["out"]), dtypes["out"], target)), 0


class _Copy(Codelet):
    """On-tile copy / cast of a region (popops::Cast when the types differ)."""

    name = "popops::Copy"
    builtin = True
    kind = "MultiVertex"
    inputs = ("in",)
    outputs = ("out",)
    # out[i] = in[i]: walked in out's storage order where the two have one shape (align_positionwise),
    # and a copy out of a concatenation in its parts (BatchPlan.pieces); else whole, reshaped
    positionwise = True

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        a, b = dtypes["in"].name, dtypes["out"].name
        return f"popops::Cast<{a},{b}>" if a != b else f"{self.name}<{a}>"

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        return {"out": values["in"].astype(values["out"].dtype).reshape(values["out"].shape)}

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        n, a, b = _n(shapes["out"]), dtypes["in"], dtypes["out"]
        if a != b:
            return int(cost_model.cast_cycles(n, a, b, target)), int(cost_model.unary_flops("cast", n, a, b))
        return int(cost_model.copy_cycles(n * a.itemsize, target)), 0


class _Reduce(Codelet):
    """Reduce each vertex's ``in`` region to its ``out`` region (out elements = leading groups)."""

    builtin = True
    kind = "Vertex"  # PopLibs' Reduce is a worker vertex (cost_model.reduce_cycles)
    inputs = ("in",)
    outputs = ("out",)

    def __init__(self, name: str, op: str, fn: Callable[..., np.ndarray]) -> None:
        self.name, self.op, self.fn = name, op, fn

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}<{dtypes['in'].name},{dtypes['out'].name}>"

    def check_fields(self, where: str, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
        super().check_fields(where, shapes, params)
        n_in, n_out = _n(shapes["in"]), _n(shapes["out"])
        if n_out == 0 or n_in % n_out:
            raise ValueError(
                f"compute set {where!r}: {self.name} needs len(in) a multiple of len(out), got {n_in} and {n_out}"
            )

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        v, out = values["in"], values["out"]
        grouped = v.reshape(v.shape[0], int(np.prod(out.shape[1:], dtype=np.int64)), -1)
        return {
            "out": self.fn(grouped.astype(np.float64) if out.dtype.kind == "f" else grouped, axis=2)
            .astype(out.dtype)
            .reshape(out.shape)
        }

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        n_in, n_out = _n(shapes["in"]), _n(shapes["out"])
        cyc = cost_model.reduce_cycles(self.op, n_in, n_out, dtypes["in"], target)
        return int(cyc), int(cost_model.reduce_flops(self.op, n_in, n_out, dtypes["in"]))


class _MatMul(Codelet):
    """out[m, n] (+)= a[m, k] @ b[k, n] on one tile (AMP for float types; ref §3.7)."""

    builtin = True
    kind = "SupervisorVertex"
    inputs = ("a", "b")
    code_bytes = MATMUL_CODE_BYTES

    def __init__(self, name: str, accumulate: bool) -> None:
        self.name, self.accumulate = name, accumulate
        self.outputs = () if accumulate else ("out",)
        self.inouts = ("out",) if accumulate else ()

    def type_name(self, dtypes: Mapping[str, np.dtype]) -> str:
        return f"{self.name}<{dtypes['a'].name},{dtypes['out'].name}>"

    def check_fields(self, where: str, shapes: Mapping[str, tuple[int, ...]], params: Mapping[str, Any]) -> None:
        super().check_fields(where, shapes, params)
        a, b, o = shapes["a"], shapes["b"], shapes["out"]
        if len(a) != 2 or len(b) != 2 or len(o) != 2 or a[1] != b[0] or o != (a[0], b[1]):
            raise ValueError(f"compute set {where!r}: {self.name} needs a[m,k], b[k,n], out[m,n]; got {a}, {b}, {o}")

    def run_batch(self, values: dict[str, np.ndarray], params: Mapping[str, Any]) -> dict[str, np.ndarray]:
        out = values["out"]
        acc = np.float64 if out.dtype.kind == "f" else np.int64
        prod = np.matmul(values["a"].astype(acc), values["b"].astype(acc))
        if self.accumulate:
            prod += out
        return {"out": prod.astype(out.dtype)}

    def estimate(
        self,
        shapes: Mapping[str, tuple[int, ...]],
        dtypes: Mapping[str, np.dtype],
        params: Mapping[str, Any],
        target: Target,
    ) -> tuple[int, int]:
        (m, k), (_, n) = shapes["a"], shapes["b"]
        dt = dtypes["a"]
        if dt.kind == "f":  # AMP with float partials (PopLibs' default partials type, ref §4.7)
            cyc = cost_model.amp_matmul_cycles(m, k, n, dt, np.float32, target)
        else:
            cyc = cost_model.mac_matmul_cycles(m, k, n, dt, dt, target)
        return int(cyc), int(cost_model.matmul_flops(m, k, n))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


BUILTIN_CODELETS: dict[str, Codelet] = {
    c.name: c
    for c in [
        _Elementwise("popops::Neg", "negate", np.negative, 1),
        _Elementwise("popops::Exp", "exponent", np.exp, 1),
        _Elementwise("popops::Log", "log", np.log, 1),
        _Elementwise("popops::Sigmoid", "sigmoid", _sigmoid, 1),
        _Elementwise("popops::Relu", "relu", lambda x: np.maximum(x, 0), 1),
        _Elementwise("popops::Tanh", "tanh", np.tanh, 1),
        _Elementwise("popops::Sqrt", "sqrt", np.sqrt, 1),
        _Elementwise("popops::Abs", "absolute", np.abs, 1),
        _Elementwise("popops::Square", "square", np.square, 1),
        _Elementwise("popops::Add", "add", np.add, 2),
        _Elementwise("popops::Sub", "subtract", np.subtract, 2),
        _Elementwise("popops::Mul", "multiply", np.multiply, 2),
        _Elementwise("popops::Div", "divide", np.divide, 2),
        _Elementwise("popops::Max", "maximum", np.maximum, 2),
        _Elementwise("popops::Min", "minimum", np.minimum, 2),
        _ScaledAdd(),
        _Fill(),
        _Copy(),
        _Reduce("popops::ReduceAdd", "add", np.sum),
        _Reduce("popops::ReduceMax", "max", np.max),
        _MatMul("poplin::MatMul", accumulate=False),
        _MatMul("poplin::MatMulAcc", accumulate=True),
    ]
}


def resolve_codelet(codelet: str | Codelet) -> Codelet:
    if isinstance(codelet, Codelet):
        return codelet
    if isinstance(codelet, type) and issubclass(codelet, Codelet):
        return codelet()
    if codelet in BUILTIN_CODELETS:
        return BUILTIN_CODELETS[codelet]
    raise ValueError(f"unknown codelet {codelet!r}; built-in codelets: {', '.join(BUILTIN_CODELETS)}")
