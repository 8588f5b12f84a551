"""Liveness of variables over program steps (the leaves of the program tree, in pre-order).

A variable is always-live if it is a constant, is read or written by the host, is never
accessed, is read before it is written (its value comes from before the program; after a WriteUndef it
is undefined instead), or is used
by more than one top-level program (its value persists between runs). Otherwise it is live
from its first write to its last read, split where a WriteUndef ends its value; a value that
crosses a Repeat body boundary, or is read before written inside a body (carried from one
iteration to the next), is live across the whole body.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from profiler.compiler.compile import CompiledGraph, ControlNode, Node, Step


@dataclass
class Liveness:
    always_live: np.ndarray  # bool per variable
    intervals: list[tuple[int, int, int]]  # (variable, first_step, last_step) of not-always-live variables
    hull: dict[int, tuple[int, int]]  # variable -> (first, last) over all its intervals
    # variables live only inside calls of one function: -> (function id, first, last step) relative
    # to the start of a call (placed once for all the calls, profiler.compiler.memory)
    in_calls: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    # not-always-live variables whose value crosses a Repeat body's boundary or is carried from one
    # iteration to the next (their spans extended over the body); the others are made anew each
    # iteration, so the host may drop their values between iterations (profiler.engine)
    carried: frozenset[int] = frozenset()


def _extend_for_repeats(
    first: int, last: int, read_first: bool, repeats: list[tuple[int, int]]
) -> tuple[int, int, bool]:
    """(first, last) extended over every Repeat body the span crosses or, read first, is inside;
    and whether any body extended it (the value is carried across a body's boundary)."""
    carried = False
    # innermost bodies first: ranges are appended as bodies finish lowering, inner before outer
    for a, b in repeats:
        overlaps = first <= b and last >= a
        inside = a <= first and last <= b
        if overlaps and (not inside or read_first):
            first, last, carried = min(first, a), max(last, b), True
    return first, last, carried


def analyse(c: CompiledGraph) -> Liveness:
    g = c.graph
    nvars = len(g.variables)
    events: dict[int, list[tuple[int, str]]] = {}
    for node in c.steps:
        for v in node.reads:
            events.setdefault(v, []).append((node.step, "R"))
        for v in node.writes:
            events.setdefault(v, []).append((node.step, "W"))
        for v in node.undefs:
            events.setdefault(v, []).append((node.step, "U"))
    # If conditions are read by the If node; charge the read to the first step under it
    for control in c.nodes:
        if isinstance(control, ControlNode) and control.condition is not None:
            step = _first_step(control)
            if step >= 0:
                for v in control.reads:
                    events.setdefault(v, []).append((step, "R"))
    always = np.zeros(nvars, dtype=bool)
    intervals: list[tuple[int, int, int]] = []
    hull: dict[int, tuple[int, int]] = {}
    carried: set[int] = set()
    prog_of_step = np.zeros(len(c.steps), dtype=np.int64)
    for i, (a, b) in enumerate(c.program_ranges):
        prog_of_step[a : b + 1] = i
    for var in g.variables:
        ev = sorted(events.get(var.id, []), key=lambda e: (e[0], "RWU".index(e[1])))
        accesses = [e for e in ev if e[1] != "U"]
        if var.constant or var.host_visible or not accesses:
            always[var.id] = True
            continue
        # read first: its value comes from before the program, unless a WriteUndef came first (then
        # the read is of undefined data, e.g. the old part of a tensor partly updated in place)
        read_first = accesses[0][1] == "R" and ev[0][1] != "U"
        if len({int(prog_of_step[s]) for s, _ in accesses}) > 1 or read_first:
            always[var.id] = True
            continue
        segments: list[list[tuple[int, str]]] = [[]]
        for e in ev:
            if e[1] == "U":
                segments.append([])
            else:
                segments[-1].append(e)
        spans = []
        for seg in segments:
            if seg:
                first, last, over = _extend_for_repeats(seg[0][0], seg[-1][0], seg[0][1] == "R", c.repeat_ranges)
                spans.append((first, last))
                if over:
                    carried.add(var.id)
        spans.sort()
        merged: list[list[int]] = []
        for a, b in spans:
            if merged and a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        intervals.extend((var.id, a, b) for a, b in merged)
        hull[var.id] = (merged[0][0], merged[-1][1])
    # receive buffers (profiler.compiler.receive_buffers): live from their exchange to the compute set reading them
    for k, buf in enumerate(c.receive_buffers):
        vid = nvars + k
        intervals.extend((vid, a, b) for a, b in buf.spans)
        hull[vid] = (min(a for a, _ in buf.spans), max(b for _, b in buf.spans))
    always = np.concatenate([always, np.zeros(len(c.receive_buffers), dtype=bool)])
    return Liveness(always, intervals, hull, _in_calls(intervals, c.call_ranges), frozenset(carried))


def _in_calls(
    intervals: list[tuple[int, int, int]], calls: list[tuple[int, int, int]]
) -> dict[int, tuple[int, int, int]]:
    """Variables whose every interval ends inside a call of one function and starts after the call
    before it ended (a function's temporaries, and its parameters written just before each call,
    whose value ends with the call): their lifetime relative to the call's start, the union over calls."""
    if not calls:
        return {}
    calls = sorted(calls, key=lambda r: r[1])
    starts = np.array([a for _, a, _ in calls], dtype=np.int64)
    found: dict[int, tuple[int, int, int]] = {}
    bad: set[int] = set()
    for v, a, b in intervals:
        if v in bad:
            continue
        k = int(np.searchsorted(starts, b, side="right")) - 1
        after = calls[k - 1][2] if k > 0 else -1  # the call before ended here
        if k < 0 or b > calls[k][2] or a <= after:
            bad.add(v)
            found.pop(v, None)
            continue
        fid, s = calls[k][0], calls[k][1]
        prev = found.get(v)
        if prev is not None and prev[0] != fid:
            bad.add(v)
            found.pop(v, None)
            continue
        found[v] = (fid, a - s, b - s) if prev is None else (fid, min(prev[1], a - s), max(prev[2], b - s))
    return found


def _first_step(node: ControlNode) -> int:
    stack: list[Node] = [node]
    while stack:
        n = stack.pop(0)
        if isinstance(n, Step):
            return n.step
        stack = (n.children if isinstance(n, ControlNode) else []) + stack
    return -1
