"""The report's vocabularies as types: step and control-program types, memory categories and
regions, debug-context layers and the provenance of a figure.

Each is a ``StrEnum`` whose values are the strings stored in the report (libpva's names where
PopVision has one, so its users recognise them): a member *is* its string (``StepType.SYNC ==
"Sync"``, hashes alike, writes as itself to Arrow and JSON), so the code names a member and a typo
is an AttributeError instead of a silently different string. The tuples ``schema`` exports
(``STEP_TYPES``, ``MEMORY_CATEGORIES``...) are these enums in order. No other module of the project
spells these strings (``tests/test_vocabulary.py``).
"""

from __future__ import annotations

from enum import StrEnum


class StepType(StrEnum):
    """A program step's type: libpva ``pva.Program.Type`` names (reference/popvision.md)."""

    ON_TILE_EXECUTE = "OnTileExecute"
    DO_EXCHANGE = "DoExchange"
    GLOBAL_EXCHANGE = "GlobalExchange"
    STREAM_COPY_BEGIN = "StreamCopyBegin"
    STREAM_COPY_MID = "StreamCopyMid"
    STREAM_COPY_END = "StreamCopyEnd"
    SYNC = "Sync"
    WRITE_UNDEF = "WriteUndef"


class ControlType(StrEnum):
    """A control node of the program tree (Poplar's control programs)."""

    PROGRAM = "Program"
    SEQUENCE = "Sequence"
    REPEAT = "Repeat"
    IF = "If"
    SWITCH = "Switch"
    CALL = "Call"


class MemoryCategory(StrEnum):
    """What a tile's bytes hold: libpva's memory category names (reference/popvision.md §3.5)."""

    VERTEX_CODE = "vertexCode"
    VERTEX_INSTANCE_STATE = "vertexInstanceState"
    VERTEX_FIELD_DATA = "vertexFieldData"
    VECTOR_LIST_DESCRIPTOR = "vectorListDescriptor"
    COPY_DESCRIPTOR = "copyDescriptor"
    CONTROL_CODE = "controlCode"
    CONTROL_ID = "controlId"
    CONTROL_TABLE = "controlTable"
    INTERNAL_EXCHANGE_CODE = "internalExchangeCode"
    GLOBAL_EXCHANGE_CODE = "globalExchangeCode"
    HOST_EXCHANGE_CODE = "hostExchangeCode"
    HOST_EXCHANGE_PACKET_HEADER = "hostExchangePacketHeader"
    GLOBAL_EXCHANGE_PACKET_HEADER = "globalExchangePacketHeader"
    INSTRUMENTATION_RESULTS = "instrumentationResults"
    STACK = "stack"
    CONSTANT = "constant"
    VARIABLE = "variable"


class MemoryRegion(StrEnum):
    """A tile's memory region (Graph Analyser's memory report); overflowed = bytes beyond the tile."""

    NON_INTERLEAVED = "non_interleaved"
    INTERLEAVED = "interleaved"
    OVERFLOWED = "overflowed"


class Layer(StrEnum):
    """A debug context's software layer; the Operations views group by one."""

    POPLIBS = "poplibs"
    ONNX = "onnx"
    USER = "user"


class Provenance(StrEnum):
    """Where a figure comes from (SPEC.md says which applies to each column)."""

    SIMULATED = "simulated"  # produced by tilescope's BSP model of the IPU while running
    ESTIMATED = "estimated"  # compile-time estimate (cost model, FLOP counting rules)
    MEASURED = "measured"  # measured on the host (wall time) or fixed by the program itself
    STRUCTURAL = "structural"  # a property of the compiled graph (ids, names, placements)
