"""Matrix products: MatMul, Gemm, Einsum, and the matmul the other groups build with."""

from __future__ import annotations

import string
from typing import Any

import numpy as np
import onnx

from profiler import ops
from profiler.chip.dtypes import is_float
from profiler.poplar.tensor import Tensor

from ..builder import Builder, Value, at_least_1d, device_dtype
from ..errors import Unsupported
from .common import as_text, attrs, reduce, shape_of
from .registry import handles


def matmul(b: Builder, a: Value, c: Value) -> Tensor:
    """numpy.matmul semantics (1-D promotion, broadcast batch dimensions) with ops.matmul. A 2-D
    weight (host array) is created laid out for the product (createMatMulInputRHS). A model built in
    FP8 takes both operands in FP8 (Builder.fp8_operand); the product is then float16."""
    if isinstance(a, Tensor) and a.rank >= 1 and not isinstance(c, Tensor) and np.ndim(c) == 2 and a.dtype.kind == "f":
        a = b.device(b.fp8_operand(a))
        k_, m_ = a.shape[-1], int(np.prod(a.shape[:-1], dtype=np.int64))

        def laid_out(t: Tensor) -> bool:
            return t.shape[0] == k_ and ops.map_for_matmul(b.graph, t, "rhs", (m_, k_), t.shape, b.partials, b.amp)

        like = a.dtype if np.asarray(c).dtype != a.dtype else None
        dt = device_dtype(np.asarray(c).dtype if like is None else like, b.half)
        # stored as PopLibs creates the weights for this product (createMatMulInputRHS), where it groups them
        storage = (
            ops.operand_storage(b.graph, "rhs", dt, (m_, k_), np.shape(c), b.partials, b.amp)
            if np.shape(c)[0] == k_
            else None
        )
        ta, tc = a, b.device(c, like=like, mapper=laid_out, storage=storage)
    else:
        ta, tc = b.pair(a, c)
        if is_float(ta.dtype):
            ta, tc = b.device(b.fp8_operand(ta)), b.device(b.fp8_operand(tc))
    if not is_float(ta.dtype):
        raise Unsupported(f"integer matmul ({ta.dtype.name})")
    unscale = b.fp8_unscale(ta, tc)  # before the reshapes below (it knows the casts by identity)
    a1, c1 = ta.rank == 1, tc.rank == 1
    if a1:
        ta = ta.reshape(1, -1)
    if c1:
        tc = tc.reshape(-1, 1)
    m, k = ta.shape[-2:]
    k2, n = tc.shape[-2:]
    if k != k2:
        raise ValueError(f"MatMul: shapes {ta.shape} and {tc.shape} do not multiply")
    batch = tuple(np.broadcast_shapes(ta.shape[:-2], tc.shape[:-2]))
    if tc.rank == 2:  # [.., M, K] x [K, N]: one big product
        # held channel-grouped as PopLibs holds it (a matmul's result is its convolution's output,
        # {C/ocpg, batch, ocpg}: lib/poplin/Convolution.cpp getPartialOutputShape); the elementwise ops
        # after it clone that layout (Graph::clone), so the next matmul's lhs arrives grouped
        out = ops.matmul(
            b.graph,
            ta.reshape(-1, k),
            tc,
            b.prog,
            partials_dtype=b.partials,
            available_memory_proportion=b.amp,
            grouped_out=True,
            log2_scale=unscale,
        ).reshape(*ta.shape[:-2], m, n)
    else:
        g = int(np.prod(batch, dtype=np.int64))
        xa = ta.broadcast_to(batch + (m, k)).reshape(g, m, k)
        xc = tc.broadcast_to(batch + (k, n)).reshape(g, k, n)
        # PopLibs holds every product's result channel-grouped (getPartialOutputShape, as above). A product
        # that widens (n > k: the attention's scores, [S, d] x [d, S]) is held row by row instead: grouped,
        # the softmax after it reads and reduces a factored view, 1.8x the host time of the whole import
        # at BERT-base batch 8 for 1.6 of 8.6 MiB of exchange code a layer (docs/fidelity.md). One that
        # narrows (the context, [S, S] x [S, d]) is held grouped: its reader is the next product's lhs,
        # which then arrives a run per channel group and sequence, not one per row (packed BERT-base
        # at batch 40: the output projection's lhs copy read 385 regions a tile, docs/fidelity.md)
        out = ops.matmul(b.graph, xa, xc, b.prog, partials_dtype=b.partials, available_memory_proportion=b.amp,
                         grouped_out=n <= k, log2_scale=unscale).reshape(*batch, m, n)  # fmt: skip
    shape = out.shape
    if a1:
        shape = shape[:-2] + shape[-1:]
    if c1:
        shape = shape[:-1]
    return out.reshape(shape)


@handles("MatMul")
def _matmul(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    return [matmul(b, inputs[0], inputs[1])]


@handles("Gemm")
def _gemm(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    a, c = inputs[0], inputs[1]
    if at.get("transA", 0):
        a = a.T if isinstance(a, Tensor) else np.asarray(a).T
    if at.get("transB", 0):
        c = c.T if isinstance(c, Tensor) else np.asarray(c).T
    if alpha != 1.0 and not isinstance(c, Tensor):
        c, alpha = np.asarray(c) * np.asarray(alpha, dtype=np.asarray(c).dtype), 1.0
    y = matmul(b, a, c)
    if alpha != 1.0:
        y = ops.scale(b.graph, y, alpha, b.prog)
    bias = inputs[2] if len(inputs) > 2 else None
    if bias is not None and beta != 0.0:
        if isinstance(bias, Tensor):
            if beta != 1.0:
                bias = ops.scale(b.graph, at_least_1d(bias), beta, b.prog).reshape(bias.shape)
        elif beta != 1.0:
            bias = np.asarray(bias) * np.asarray(beta, dtype=np.asarray(bias).dtype)
        y = b.binary("add", y, bias)
    return [y]


def _einsum_terms(eq: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand and output index strings, with any ellipsis spelled out as letters the equation does
    not use (broadcast dimensions, right-aligned as numpy does)."""
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"Einsum: {len(terms)} terms for {len(ranks)} inputs")
    if "..." in eq:
        free = [c for c in string.ascii_uppercase + string.ascii_lowercase if c not in eq]
        widths = [r - len(t.replace("...", "")) for t, r in zip(terms, ranks, strict=True) if "..." in t]
        ell = "".join(free[: max(widths, default=0)])
        terms = [t.replace("...", ell[len(ell) - (r - len(t.replace("...", ""))):]) if "..." in t else t
                 for t, r in zip(terms, ranks, strict=True)]  # fmt: skip
        if arrow:
            rhs = rhs.replace("...", ell)
        else:
            lhs = ",".join(terms)
            rest = {c: lhs.count(c) for c in set(lhs) if c not in ell and c in string.ascii_letters}
            rhs = ell + "".join(sorted(c for c, k in rest.items() if k == 1))
            arrow = "->"
    if not arrow:
        counts = {c: lhs.count(c) for c in set(lhs) if c in string.ascii_letters}
        rhs = "".join(sorted(c for c, k in counts.items() if k == 1))
    return terms, rhs


def _sum_out(b: Builder, x: Tensor, term: str, keep: set[str]) -> tuple[Tensor, str]:
    """Sum over the indices of ``term`` that appear nowhere else."""
    gone = [i for i, c in enumerate(term) if c not in keep]
    if not gone:
        return x, term
    y = reduce(b, x, gone, "add", keepdims=False)
    return y, "".join(c for c in term if c in keep)


def _diagonal(x: Tensor, term: str) -> tuple[Tensor, str]:
    """An index repeated within one operand (``ii``, ``bii``) takes the diagonal: a view."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        i, j = term.index(c), term.index(c, term.index(c) + 1)
        rest = [d for d in range(x.rank) if d not in (i, j)]
        moved = x.transpose(*rest, i, j)
        ar = np.arange(min(x.shape[i], x.shape[j]))
        x = moved[(Ellipsis, ar, ar)]
        term = "".join(term[d] for d in rest) + c
    return x, term


@handles("Einsum")
def _einsum(b: Builder, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
    eq = as_text(attrs(node).get("equation"), "")
    terms, out = _einsum_terms(eq, [len(shape_of(v)) for v in inputs])
    if len(terms) == 1:
        x, t0 = _diagonal(b.device(inputs[0]), terms[0])
        y, t = _sum_out(b, x, t0, set(out))
        return [y.transpose(*[t.index(c) for c in out]) if t != out else y]
    if len(terms) != 2:
        raise Unsupported(f"{len(terms)} operands")
    a, c = b.pair(inputs[0], inputs[1])
    (a, ta), (c, tc) = _diagonal(a, terms[0]), _diagonal(c, terms[1])
    a, ta = _sum_out(b, a, ta, set(tc) | set(out))
    c, tc = _sum_out(b, c, tc, set(ta) | set(out))
    batch = [ch for ch in ta if ch in tc and ch in out]
    contract = [ch for ch in ta if ch in tc and ch not in out]
    left = [ch for ch in ta if ch not in tc]
    right = [ch for ch in tc if ch not in ta]
    size = {ch: max(a.shape[ta.index(ch)] if ch in ta else 1, c.shape[tc.index(ch)] if ch in tc else 1)
            for ch in set(ta) | set(tc)}  # fmt: skip
    # broadcast batch dimensions of size 1 (ellipsis dimensions broadcast as in numpy)
    if any(a.shape[ta.index(ch)] != size[ch] for ch in batch):
        a = a.broadcast_to([size[ch] if ch in batch else a.shape[i] for i, ch in enumerate(ta)])
    if any(c.shape[tc.index(ch)] != size[ch] for ch in batch):
        c = c.broadcast_to([size[ch] if ch in batch else c.shape[i] for i, ch in enumerate(tc)])

    def prod(chs: list[str]) -> int:
        return int(np.prod([size[ch] for ch in chs], dtype=np.int64))

    # [batch, left, contract] x [batch, contract, right] -> [batch, left, right]: one (batched) matmul
    a3 = a.transpose(*[ta.index(ch) for ch in batch + left + contract]).reshape(prod(batch), prod(left), prod(contract))
    c3 = c.transpose(*[tc.index(ch) for ch in batch + contract + right]).reshape(
        prod(batch), prod(contract), prod(right)
    )
    if not batch:
        y = matmul(b, a3.reshape(prod(left), prod(contract)), c3.reshape(prod(contract), prod(right)))
    else:
        y = matmul(b, a3, c3)
    got = batch + left + right
    y = y.reshape([size[ch] for ch in got]) if got else y.reshape(())
    return [y.transpose(*[got.index(ch) for ch in out]) if got != list(out) else y]
