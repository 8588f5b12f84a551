"""The kinds a trace colours its steps by (compute, exchange, ...), from each step's program step type:
the flat timeline and the flame share them."""

from __future__ import annotations

from report_format.vocabulary import StepType

#: Step kinds shown in the trace, in legend order, from the program step type.
KINDS = ("compute", "exchange", "global exchange", "stream copy", "sync", "other")
KIND_OF_TYPE: dict[str, str] = {
    StepType.ON_TILE_EXECUTE: "compute",
    StepType.DO_EXCHANGE: "exchange",
    StepType.GLOBAL_EXCHANGE: "global exchange",
    StepType.STREAM_COPY_BEGIN: "stream copy",
    StepType.STREAM_COPY_MID: "stream copy",
    StepType.STREAM_COPY_END: "stream copy",
    StepType.SYNC: "sync",
}
