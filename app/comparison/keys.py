"""Identity of things across two reports: the keys that say "the same step / operation / variable".

Ids (program_id, debug_context_id, variable_id) are dense numbers assigned at compile time and
shift whenever anything is added, so comparison never matches by id. Instead:

- a program step is keyed by its path in the program tree (type and name of every ancestor, the
  top-level program by its index since runs refer to it) and its own type and name; order is left
  to the sequence alignment (``align.py``), so an inserted step does not shift the others;
- an operation (debug context) by its path of ``layer:name(op_type)`` from the outermost context;
- a variable by its name.

An operation or variable key occurring several times in one report gets ``#2``, ``#3``… in order
of appearance; step keys stay as they are (the alignment pairs repeats in order).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from app.views import model_names
from report_format.reader import Report

SEP = " > "


def disambiguate(keys: list[str]) -> list[str]:
    """Give repeated keys an occurrence suffix: ['a', 'a', 'b'] -> ['a', 'a#2', 'b']."""
    seen: dict[str, int] = {}
    out = []
    for k in keys:
        n = seen.get(k, 0) + 1
        seen[k] = n
        out.append(k if n == 1 else f"{k}#{n}")
    return out


def program_paths(programs: pd.DataFrame) -> list[str]:
    """Path of every row of the programs table (rows in pre-order, so parents come first)."""
    ids = programs["program_id"].to_numpy()
    parents = programs["parent_id"].to_numpy()
    types = programs["type"].tolist()
    names = programs["name"].tolist()
    child = programs["child_index"].to_numpy()
    path_of: dict[int, str] = {}
    out = []
    for pid, parent, typ, name, ci in zip(ids.tolist(), parents.tolist(), types, names, child.tolist(), strict=True):
        own = f"{typ}:{name}"
        path = f"{path_of[parent]}{SEP}{own}" if parent in path_of else f"[{ci}]{own}"
        path_of[pid] = path
        out.append(path)
    return out


def step_keys(report: Report) -> pd.DataFrame:
    """Program steps (leaves) in step order: step, program_id, type, name, key. ``name`` is the
    step as the single-report pages name it, the model's name first ('s3b0_b_conv_365 (matmul)' on
    an ONNX report, ``model_names.with_model_name``); ``key`` keeps Poplar's own names, so matching
    two reports does not depend on the model's names."""
    prog = report.programs()
    paths = np.array(program_paths(prog), dtype=object)
    leaf = prog["step"].to_numpy() >= 0
    out = prog.loc[leaf, ["step", "program_id", "type", "name"]].copy()
    model = model_names.of_programs(report).reindex(out["program_id"].to_numpy()).fillna("").to_numpy(dtype=object)
    out["name"] = model_names.with_model_name(model, out["name"].to_numpy(dtype=object))
    out["key"] = paths[leaf]
    # repeated keys (every "Sync:Internal") stay equal: the alignment pairs them in order, where an
    # occurrence suffix would shift after any inserted repeat and unpair everything behind it
    return out.sort_values("step", kind="stable").reset_index(drop=True)


def context_paths(contexts: pd.DataFrame) -> pd.Series:
    """Path of every debug context (index: debug_context_id), outermost first."""
    own = (contexts["layer"] + ":" + contexts["name"] + "(" + contexts["op_type"] + ")").tolist()
    ids = contexts["debug_context_id"].tolist()
    parent = dict(zip(ids, contexts["parent_id"].tolist(), strict=True))
    own_of = dict(zip(ids, own, strict=True))
    memo: dict[int, str] = {}

    def path(i: int) -> str:
        chain = []
        cur = i
        while cur >= 0 and cur not in memo and cur in own_of and len(chain) <= len(ids):
            chain.append(cur)
            cur = parent[cur]
        prefix = memo.get(cur, "")
        for c in reversed(chain):
            prefix = f"{prefix}{SEP}{own_of[c]}" if prefix else own_of[c]
            memo[c] = prefix
        return memo.get(i, prefix)

    paths = [path(i) for i in ids]
    return pd.Series(disambiguate(paths), index=pd.Index(ids, name="debug_context_id"), dtype=object)


def context_of_layer(contexts: pd.DataFrame, layer: str) -> pd.Series:
    """For every debug context, its nearest enclosing context of ``layer`` (itself included), or -1."""
    ids = contexts["debug_context_id"].tolist()
    parent = dict(zip(ids, contexts["parent_id"].tolist(), strict=True))
    is_layer = dict(zip(ids, (contexts["layer"] == layer).tolist(), strict=True))
    out = []
    for i in ids:
        cur, hops = i, 0
        while cur >= 0 and cur in is_layer and not is_layer[cur] and hops <= len(ids):
            cur, hops = parent[cur], hops + 1
        out.append(cur if cur in is_layer and is_layer[cur] else -1)
    return pd.Series(out, index=pd.Index(ids, name="debug_context_id"), dtype=np.int64)


def outer_join(
    baseline: list[str] | np.ndarray, active: list[str] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of two lists of unique keys (baseline's order, then keys new in active): returns the
    keys, and for each the row in baseline and in active (-1 where absent). Hash-based and
    vectorised: pandas' isin/reindex on Arrow strings is far slower on 100,000 variables."""
    nb = len(baseline)
    codes, uniques = pd.factorize(
        np.concatenate([np.asarray(baseline, dtype=object), np.asarray(active, dtype=object)])
    )
    k = len(uniques)
    in_b = np.full(k, -1, dtype=np.int64)
    in_a = np.full(k, -1, dtype=np.int64)
    in_b[codes[:nb]] = np.arange(nb)
    in_a[codes[nb:]] = np.arange(len(codes) - nb)
    return np.asarray(uniques, dtype=object), in_b, in_a


def take(values: np.ndarray, rows: np.ndarray, fill: object) -> np.ndarray:
    """``values[rows]`` with ``fill`` where rows is -1."""
    values = np.asarray(values)
    if values.size == 0:
        return np.full(rows.size, fill, dtype=object if isinstance(fill, str) else None)
    out = values[np.maximum(rows, 0)]
    if (rows < 0).any():
        out = np.where(rows >= 0, out, fill)
    return out


def factorize_pair(baseline: list[str] | np.ndarray, active: list[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes for two key lists, equal codes for equal keys."""
    nb = len(baseline)
    codes, _ = pd.factorize(np.concatenate([np.asarray(baseline, dtype=object), np.asarray(active, dtype=object)]))
    return codes[:nb].astype(np.int64), codes[nb:].astype(np.int64)
