"""A block's consecutive elementwise steps, grouped into chains the engine runs in one pass.

``profiler.executable.elementwise_chains`` says which consecutive steps make a chain and how its pass walks
them; this module groups a block's acting steps and runs a chain's pass on the run's threads. The
engine keeps each step's own bookkeeping around the pass, in the steps' order: the values a step
makes, the read caches it invalidates and the values dropped after it (``Engine._act_chain``). A
step's result the program reads later is written into a spare array that then becomes the
variable's value (the array it replaces becomes the next spare), so no value array is made beyond
what the steps one by one make; a result only the chain's next step reads is never written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from profiler.engine.batch_run import grouped_result
from profiler.executable import actions
from profiler.executable.convert import kernels
from profiler.executable.elementwise_chains import Chain, chain_of, step_kind
from profiler.executable.half_maps import _in_order, _strided
from profiler.host import parallel

if TYPE_CHECKING:
    from profiler.compiler.compile import Step
    from profiler.executable.plans import BatchPlan

# Elements a part of a chain's pass has at least when split over the run's threads: a chain makes
# several ops an element (~0.3-0.7 ns an element in cache, its operands read once), so a split gains
# from smaller passes than a single op's (batch_run.PASS_PART_ELEMENTS, 256 Ki): ResNet-50 b1 fp16
# C600 medians 100.0 against 101.1 ms (five alternations in one process, 2026-11-30)
CHAIN_PART_ELEMENTS = 1 << 16
# the result buffer of a step whose result is not written (the pass never touches it), by chain type
_UNWRITTEN: dict[np.dtype, np.ndarray] = {
    np.dtype(np.float16): np.zeros(1, np.uint16),
    np.dtype(np.float32): np.zeros(1, np.float32),
}


@dataclass(frozen=True, eq=False)
class ChainedSteps:
    """Consecutive steps run as one chain: the chain, its op table with only the ``stored``
    results written (per step: whether the program reads its result after the chain)."""

    nodes: tuple[Step, ...]
    chain: Chain
    table: np.ndarray
    stored: tuple[bool, ...]


def group_steps(
    acting: Sequence[Step],
    release: Mapping[int, Sequence[int]],
    filled: Mapping[int, set[int] | frozenset[int]],
) -> list[Step | ChainedSteps]:
    """``acting`` (a block's steps with an action, in order) with each chain of two or more steps
    as one ``ChainedSteps``. ``release``: the variables dropped after each step; ``filled``: those
    a step writes every element of (a chained step's result must be one: its spare array holds
    nothing else). For the engine's kernels' batches (not with ``tilescope.executeVertices``)."""
    out: list[Step | ChainedSteps] = []
    nodes: list[Step] = []
    batches: list[BatchPlan] = []
    chain: Chain | None = None

    def close() -> None:
        if chain is not None:
            dropped = [set(release.get(n.step, ())) for n in nodes]
            # a result is written unless dropped within the chain or written again by a later step
            stored = tuple(
                chain.results[k] not in set().union(*dropped[k:]) and chain.results[k] not in chain.results[k + 1 :]
                for k in range(len(nodes))
            )
            keep = {k for k, s in enumerate(stored) if s}
            out.append(ChainedSteps(tuple(nodes), chain, chain.table(keep), stored))
        else:
            out.extend(nodes)

    for node in acting:
        b = _chain_batch(node, filled)
        if b is not None and nodes:
            longer = chain_of([*batches, b])
            if longer is not None:
                nodes.append(node)
                batches.append(b)
                chain = longer
                continue
        close()
        nodes, batches, chain = ([node], [b], None) if b is not None else ([], [], None)
        if b is None:
            out.append(node)
    close()
    return out


def _one_batch(node: Step) -> BatchPlan | None:
    """The one batch an Execute step runs (its kernel's, or its vertices' where it has no kernel),
    else None."""
    action = node.action
    if not isinstance(action, actions.Execute):
        return None
    plan = action.plan
    batches = plan.batches if plan.kernel is None else plan.kernel
    return batches[0] if len(batches) == 1 else None


def _chain_batch(node: Step, filled: Mapping[int, set[int] | frozenset[int]]) -> BatchPlan | None:
    """The step's one batch where it can run in a chain (``elementwise_chains.step_kind``) and fills its
    result, else None."""
    b = _one_batch(node)
    if b is None:
        return None
    kind = step_kind(b)
    if kind == "relu in place":  # its variable the previous step's result, which that step fills (chain_of)
        return b
    return b if kind is not None and _strided(_in_order(b)[-1])[0] in filled.get(node.step, ()) else None


def run_chain(steps: ChainedSteps, buffers: tuple[np.ndarray, ...]) -> bool:
    """The chain's pass over ``buffers`` (its reads, a half's as its bits, then a result buffer per step), its
    rows split over the run's threads in parts of at least CHAIN_PART_ELEMENTS.
    False where a value is NaN: the results are then incomplete, and the steps are to run one by one."""
    chain = steps.chain
    loop = kernels().chain
    nan: list[bool] = []
    n = chain.elements
    n1 = int(chain.shape[1])
    parallel.in_row_chunks(
        lambda rows: nan.append(loop(buffers, steps.table, chain.geo, chain.shape, rows.start, rows.stop, 0, n1)),
        chain.rows,
        n,
        max(CHAIN_PART_ELEMENTS, n // parallel.threads()),
    )
    return not any(nan)


@dataclass(frozen=True, eq=False)
class ProductThenChain:
    """A product step (a convolution's im2col matmul) and the chain that reads its result next (the
    batch norm after it): each of the product's parts of rows runs the chain over those rows on
    its own thread right after writing them (``Engine._act_product_chain``), while they are in
    cache, rather than the chain making its own pass over the whole result from memory.
    ``rows_per_chain_row``: the product's rows in one row of the chain's walk (its rows of a
    channel group joined, ``elementwise_chains``)."""

    product: Step
    chained: ChainedSteps
    rows_per_chain_row: int


def pair_products(items: list[Step | ChainedSteps]) -> list[Step | ChainedSteps | ProductThenChain]:
    """``items`` (``group_steps``'s) with each product step followed by a chain over its result
    (``chain_rows_of_product``) paired as one ``ProductThenChain``."""
    out: list[Step | ChainedSteps | ProductThenChain] = []
    for item in items:
        prev = out[-1] if out else None
        if (
            isinstance(item, ChainedSteps)
            and prev is not None
            and not isinstance(prev, (ChainedSteps, ProductThenChain))
        ):
            r = chain_rows_of_product(prev, item.chain)
            if r:
                out[-1] = ProductThenChain(prev, item, r)
                continue
        out.append(item)
    return out


def chain_rows_of_product(node: Step, chain: Chain) -> int | None:
    """The product's rows per row of ``chain``'s walk where ``node`` is a product step (one batch
    of a codelet with a ``rows_field``) whose result the chain reads first (buffer 0) in a walk of
    whole rows of it: its result ``[1, m, n]`` held row-major, or channel-grouped ``[n/g, m, g]``
    (PopLibs' partials), the walk's first dim over the channel groups and each walk row ``r``
    product rows of one group. None otherwise."""
    b = _one_batch(node)
    if b is None:
        return None
    c = b.codelet
    if c.rows_field is None or len(c.outputs) != 1 or b.pieces or b.aligned_rows:
        return None
    out = b.fields[c.outputs[0]]
    held = grouped_result(out)
    if held is None or out.variable != chain.reads[0]:
        return None
    m, groups, g = held
    n0, n1, n2 = (int(x) for x in chain.shape)
    o0, s0, s1 = (int(x) for x in chain.geo[0])
    if o0 != 0 or s1 != n2 or (n0 > 1 and s0 != n1 * n2) or n0 != groups or n1 * n2 != m * g or n2 % g:
        return None
    return n2 // g


def run_chain_span(steps: ChainedSteps, buffers: tuple[np.ndarray, ...], lo: int, hi: int, jlo: int, jhi: int) -> bool:
    """The chain's pass over rows ``lo`` to ``hi`` of its walk (``Chain.rows``) whose second index
    lies in ``[jlo, jhi)`` (a product's part: its rows in every channel group, or its groups: a
    ``ProductThenChain``), on this thread. False where a value is NaN (as ``run_chain``)."""
    chain = steps.chain
    return not kernels().chain(buffers, steps.table, chain.geo, chain.shape, lo, hi, jlo, jhi)


def unwritten(dtype: np.dtype) -> np.ndarray:
    """The buffer given for a result a chain of ``dtype`` does not write."""
    return _UNWRITTEN[dtype]
