"""The Operations Graph's view: grouping by the model's structure, the visible nodes and edges as
groups open and close, and the colour scale, on a hand-built report small enough to check by hand.

The model (ONNX layer), one OnTileExecute step each, in a chain (op i reads what op i-1 wrote)::

    ctx  name           cycles     groups (outermost first, before single-member ones go)
    0    stem_conv_1      100      stem
    1    stem_relu_2       10      stem
    2    s0b0_a_conv_3    400      s0 > s0b0 > s0b0_a
    3    s0b0_b_conv_4    300      s0 > s0b0 > s0b0_b
    4    s0b1_a_conv_5    200      s0 > s0b1 > s0b1_a
    5    s0b1_b_conv_6     50      s0 > s0b1 > s0b1_b
    6    fc_7            1000      -

s0b0_a, s0b0_b, s0b1_a and s0b1_b hold one operation each, so they are no groups: the top level is
stem (110 cycles), s0 (950) and fc_7 (1000); s0 holds s0b0 (700) and s0b1 (250).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from app.views import operations as ops_view
from app.views import operations_graph as og
from report_format.fabricate import (
    DebugContexts,
    Execution,
    Memory,
    Placements,
    Programs,
    ProgramVariables,
    ReportSpec,
    Run,
    Target,
    TileBytes,
    TileCycles,
    Variables,
    write_report,
)
from report_format.reader import open_report

NAMES = ["stem_conv_1", "stem_relu_2", "s0b0_a_conv_3", "s0b0_b_conv_4", "s0b1_a_conv_5", "s0b1_b_conv_6", "fc_7"]
CYCLES = [100, 10, 400, 300, 200, 50, 1000]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    n = len(NAMES)
    tiles = 2
    # program 0: the Sequence; programs 1..n: op i's step (debug context i)
    programs = Programs(
        parent_id=[-1] + [0] * n,
        child_index=[0, *range(n)],
        type=["Sequence"] + ["OnTileExecute"] * n,
        name=["main", *NAMES],
        debug_context_id=[-1, *range(n)],
        estimated_cycles=[0, *CYCLES],
    )
    variables = Variables(
        name=[f"v{i}" for i in range(n)],
        dtype=["float32"] * n,
        shape=[[1]] * n,
        debug_context_id=list(range(n)),
        first_step=list(range(n)),
        last_step=[min(i + 1, n - 1) for i in range(n)],
        constant=[False] * n,
        interleaved=[False] * n,
        placements=Placements(list(range(n)), [0] * n, [4] * n, [4 * i for i in range(n)]),
    )
    # op i writes v_i and reads v_{i-1}: a chain of data flow
    pv = [(i + 1, i, "write") for i in range(n)] + [(i + 1, i - 1, "read") for i in range(1, n)]
    spec = ReportSpec(
        target=Target(1, tiles, 1000),
        programs=programs,
        variables=variables,
        memory=Memory.from_tiles([TileBytes(np.array([4 * n, 0]), "variable", always_live=False)]),
        program_variables=ProgramVariables(*zip(*pv, strict=True)),
        debug_contexts=DebugContexts(
            parent_id=[-1] * n,
            layer=["onnx"] * n,
            name=NAMES,
            op_type=["Conv"] * n,
            file=[""] * n,
            line=[0] * n,
            attributes=["{}"] * n,
        ),
        execution=Execution([Run(list(range(n)), TileCycles(np.repeat(np.array(CYCLES)[:, None], tiles, 1)), "run")]),
    )
    return open_report(write_report(tmp_path_factory.mktemp("graph") / "model", spec))


def test_name_scopes_and_stems():
    assert og.stem("query_matmul_58") == "query_matmul" and og.stem("Conv") == "Conv"
    assert og.name_scopes("s0b0_a_conv_11") == ["s0", "s0b0", "s0b0_a"]
    assert og.name_scopes("attn_out_bias_31") == ["attn", "attn_out"]
    assert og.name_scopes("softmax_24") == []
    assert og.name_scopes("present.3.key") == ["present", "present.3"]  # a decoder's KV outputs
    assert og.name_scopes("/encoder/layer.0/attention/MatMul") == [
        "/encoder",
        "/encoder/layer.0",
        "/encoder/layer.0/attention",
    ]
    assert og.scope_label("/encoder/layer.0") == "layer.0" and og.scope_label("s0b0_a") == "s0b0_a"
    # a node's weight upload ('stem_bn_7/scale') sits in the node's scopes, not in a scope of its own
    assert og.name_scopes("stem_bn_7/scale") == og.name_scopes("stem_bn_7") == ["stem"]


def test_an_upload_does_not_split_the_layer_it_is_uploaded_in():
    """The POD16 decoder uploads its RoPE tables where layer 0 first reads them: layer0's run of
    roots goes on past them (one 'layer0' group, not three), the tables stay outside it; an upload
    of the run's own scope joins it; an upload between two runs is not taken into either."""
    names = {0: "layer0_q_cos_40", 1: "rope_cos_8", 2: "layer0_q_sin_41", 3: "layer0_w_3", 4: "tbl_x_9", 5: "x_y_1"}
    chains = og._root_groups(list(names), names, uploads={1, 3, 4})
    assert chains[0] == chains[2] and [label for _, label in chains[0]] == ["layer0", "layer0_q"]
    assert chains[3] == chains[0][:1]  # layer0_w_3: in the same 'layer0' group
    assert chains[1] == [] and [label for _, label in chains[4]] == ["tbl"]
    # without the uploads' rule, rope_cos_8 ends layer0's run: layer0_q_sin_41 starts another
    before = og._root_groups(list(names), names)
    assert before[0][0][0] != before[2][0][0]


def test_repeated_block_finds_the_layers_of_a_stack():
    """x, then (q k v ff) three times, then out: a block of 4 from position 1, 3 repeats."""
    seq = ["x", *["q", "k", "v", "ff"] * 3, "out"]
    assert og.repeated_block(seq) == (1, 4, 3)
    assert og.repeated_block(["a", "b", "c", "d"]) is None  # nothing repeats
    # a repeat that differs once is no block: (q k) (q k) (q v) covers 4 of 6, not the 3 pairs
    assert og.repeated_block(["q", "k", "q", "k", "q", "v"]) == (0, 2, 2)
    assert og.repeated_block(["q", "k", "q", "k", "a", "b", "c", "d", "e"]) is None  # covers under half


def test_groups_and_their_sums(model):
    h = og.hierarchy(model, "onnx")
    g = h.groups.set_index("label")
    assert sorted(g.index) == ["s0", "s0b0", "s0b1", "stem"]
    assert g["cycles"].to_dict() == {"stem": 110, "s0": 950, "s0b0": 700, "s0b1": 250}
    assert g["operations"].to_dict() == {"stem": 2, "s0": 4, "s0b0": 2, "s0b1": 2}
    ids = dict(zip(h.groups["label"], h.groups.index, strict=True))
    assert g.loc["s0b0", "parent"] == ids["s0"] and g.loc["stem", "parent"] == ""
    assert g.loc["s0b0", "title"] == "2 operations: s0b0_a_conv_3 … s0b0_b_conv_4"


def test_frontier_opens_and_closes(model):
    h = og.hierarchy(model, "onnx")
    ids = dict(zip(h.groups["label"], h.groups.index, strict=True))
    top = og.default_expanded(h)
    assert top == frozenset()  # three things at the top: nothing opens by itself
    nodes, edges = og.frontier(h, top)
    label = dict(zip(nodes["id"], nodes["label"], strict=True))
    assert sorted(label.values()) == ["fc_7", "s0", "stem"]
    # the chain's six edges collapse to stem -> s0 -> fc_7, each carrying one variable
    assert sorted((label[s], label[t], v) for s, t, v in edges.itertuples(index=False)) == [
        ("s0", "fc_7", 1),
        ("stem", "s0", 1),
    ]
    opened = og.toggle(h, top, "g" + ids["s0"])
    nodes, edges = og.frontier(h, opened)
    row = nodes.set_index("label")
    assert bool(row.at["s0", "expanded"]) and row.at["s0b0", "parent"] == "g" + ids["s0"]
    assert row.at["stem", "parent"] == "" and row.at["s0b0", "cycles"] == 700
    label = dict(zip(nodes["id"], nodes["label"], strict=True))
    assert sorted((label[s], label[t]) for s, t in zip(edges["source"], edges["target"], strict=True)) == [
        ("s0b0", "s0b1"),
        ("s0b1", "fc_7"),
        ("stem", "s0b0"),
    ]  # an open group has no edges of its own: they go to what is inside it
    deeper = og.toggle(h, opened, "g" + ids["s0b0"])
    nodes, _ = og.frontier(h, deeper)
    assert {"s0b0_a_conv_3", "s0b0_b_conv_4"} <= set(nodes["label"])
    # closing s0 closes s0b0 inside it too; a click on an operation changes nothing
    assert og.toggle(h, deeper, "g" + ids["s0"]) == frozenset()
    assert og.toggle(h, deeper, "op3") == deeper and og.toggle(h, deeper, "gnope") == deeper


def test_one_group_at_the_top_opens_by_itself(model):
    """A user's 'forward' around everything: the page opens it so the first view says something."""
    h = og.hierarchy(model, "onnx")
    only = og.Hierarchy(
        ops=h.ops.assign(chain=[("top", *c) for c in h.ops["chain"]]),
        groups=pd.concat(
            [
                pd.DataFrame(
                    {"parent": [""], "label": ["forward"], "operations": [7], "title": ["all"]}, index=["top"]
                ),
                h.groups.assign(parent=h.groups["parent"].replace("", "top")),
            ]
        ),
        edges=h.edges,
    )
    assert og.default_expanded(only) == frozenset({"top"})


def test_log_colour_scale(model):
    h = og.hierarchy(model, "onnx")
    scale = og.colour_scale(h, "cycles")
    assert (scale.lo, scale.hi) == (10, 1000)  # the smallest operation, the largest node (fc_7)
    t = scale.position(np.array([10, 100, 1000, 0]))
    assert t[:3] == pytest.approx([0.0, 0.5, 1.0]) and math.isnan(t[3])  # a decade is half the scale
    assert scale.ticks() == [10.0, 100.0, 1000.0]
    colours = scale.colours(np.array([10, 1000, 0]))
    assert colours[2] == og.NO_VALUE and colours[0] != colours[1]


def test_delta_colours_agree_with_the_compare_banner(model):
    """Compare mode: "red costs more, green less" (the banner); an op 500 cycles faster is green,
    one 500 slower red, no change grey, and a group's Δ is its operations' sum."""
    h = og.hierarchy(model, "onnx")
    delta = pd.Series([-500.0, 0, 0, 0, 0, 0, 500.0], index=h.ops["op_id"].to_numpy())
    scale = og.colour_scale(h, "delta_cycles", delta)
    assert scale.signed and scale.hi == 500
    assert scale.ticks() == [-100.0, -10.0, 0.0, 10.0, 100.0]  # not ±1: it would crowd 0
    green, grey, red = scale.colours(np.array([-500.0, 0.0, 500.0]))
    assert (green, grey, red) == (
        "rgb(0, 158, 115)",
        "rgb(229, 229, 229)",
        "rgb(213, 94, 0)",
    )  # #009E73 #E5E5E5 #D55E00
    nodes, _ = og.frontier(h, frozenset())
    values = dict(zip(nodes["label"], og.node_values(h, nodes, delta), strict=True))
    assert values == {"stem": -500.0, "s0": 0.0, "fc_7": 500.0}


def test_elements_label_colour_and_link(model):
    """What Cytoscape gets: a closed group says so (▸) with its cycles and share of the layer, an
    open group is a box (compound parent) its members point at, an edge joins two shown nodes."""
    from app.figures.operations_graph import elements, legend

    h = og.hierarchy(model, "onnx")
    ids = dict(zip(h.groups["label"], h.groups.index, strict=True))
    nodes, edges = og.frontier(h, frozenset({ids["s0"]}))
    scale = og.colour_scale(h, "cycles")
    els = elements(nodes, edges, nodes["cycles"].to_numpy(float), "cycles", scale, total=float(sum(CYCLES)))
    by_label = {e["data"]["label"].split("\n")[0]: e["data"] for e in els if "source" not in e["data"]}
    assert by_label["▸ s0b0"]["parent"] == "g" + ids["s0"] and by_label["▾ s0"]["kind"] == "open"
    assert els[[e["data"].get("id") for e in els].index("g" + ids["s0b0"])]["data"]["label"] == "▸ s0b0\n700 · 34%"
    assert by_label["fc_7"]["colour"] == scale.colours(np.array([1000.0]))[0] and by_label["fc_7"]["text"] == "#fff"
    links = {(e["data"]["source"], e["data"]["target"]) for e in els if "source" in e["data"]}
    assert ("g" + ids["s0b1"], by_label["fc_7"]["id"]) in links and len(links) == len(edges) == 3
    assert "log scale" in str(legend(scale, "cycles"))


def test_an_operation_alone_in_its_onnx_node_is_named_after_it(small_report):
    """The small report's PopLibs matMul and add each sit alone in an ONNX node (MatMul_0, Add_1):
    no group of one, and the model's name comes first."""
    h = og.hierarchy(small_report, "poplibs")
    assert h.groups.empty
    assert dict(zip(h.ops["name"], h.ops["label"], strict=True)) == {"matMul": "MatMul_0/matMul", "add": "Add_1/add"}
    nodes, _ = og.frontier(h, frozenset())
    assert sorted(nodes["label"]) == ["Add_1/add", "MatMul_0/matMul"]


@pytest.fixture(scope="module")
def two_ipus(tmp_path_factory):
    """Layer 0 on IPU 0 writes v0; the pipeline's copy, outside any operation as Poplar places it,
    moves v0 to v1 and a second outside step v1 to v2 (a stage's I/O tiles, then the next IPU);
    layer 1 on IPU 1 reads v2 and writes v3."""
    names = ["layer0_matmul_1", "layer1_matmul_2"]
    programs = Programs(
        parent_id=[-1, 0, 0, 0, 0],
        child_index=[0, 0, 1, 2, 3],
        type=["Sequence", "OnTileExecute", "GlobalExchange", "GlobalExchange", "OnTileExecute"],
        name=["main", names[0], "IpuCopy to IPU 1", "IpuCopy to IPU 1", names[1]],
        debug_context_id=[-1, 0, -1, -1, 1],
        estimated_cycles=[0, 100, 10, 10, 200],
    )
    n = 4
    variables = Variables(
        name=[f"v{i}" for i in range(n)],
        dtype=["float32"] * n,
        shape=[[1]] * n,
        debug_context_id=[0, -1, -1, 1],
        first_step=list(range(n)),
        last_step=[min(i + 1, n - 1) for i in range(n)],
        constant=[False] * n,
        interleaved=[False] * n,
        placements=Placements(list(range(n)), [0, 0, 2, 2], [4] * n, [0, 4, 0, 4]),
    )
    pv = [(1, 0, "write"), (2, 0, "read"), (2, 1, "write"), (3, 1, "read"), (3, 2, "write"), (4, 2, "read")]
    pv += [(4, 3, "write")]
    cycles = np.array([[100, 100, 0, 0], [10, 10, 10, 10], [10, 10, 10, 10], [0, 0, 200, 200]])
    spec = ReportSpec(
        target=Target(2, 2, 1000),
        programs=programs,
        variables=variables,
        memory=Memory.from_tiles([TileBytes(np.array([8, 0, 8, 0]), "variable", always_live=False)]),
        program_variables=ProgramVariables(*zip(*pv, strict=True)),
        debug_contexts=DebugContexts(
            parent_id=[-1, -1],
            layer=["onnx"] * 2,
            name=names,
            op_type=["MatMul"] * 2,
            file=[""] * 2,
            line=[0] * 2,
            attributes=["{}"] * 2,
        ),
        execution=Execution([Run(list(range(4)), TileCycles(cycles), "run")]),
    )
    return open_report(write_report(tmp_path_factory.mktemp("graph") / "two_ipus", spec))


def test_layers_on_two_ipus_are_joined_through_the_inter_ipu_copies(two_ipus):
    """The copies are no operation, so before following them the two layers had no edge and the
    layout stacked them apart; the data flows layer0 -> (copy, copy) -> layer1: one edge, one
    variable (v2, what layer 1 reads)."""
    nodes, edges = ops_view.operations_graph(two_ipus, "onnx")
    name = dict(zip(nodes["op_id"], nodes["name"], strict=True))
    assert sorted(name.values()) == ["layer0_matmul_1", "layer1_matmul_2"]
    got = [(name[s], name[t], v) for s, t, v in edges[["source", "target", "variables"]].itertuples(index=False)]
    assert got == [("layer0_matmul_1", "layer1_matmul_2", 1)]
    assert nodes.set_index("name")["x"].to_dict() == {"layer0_matmul_1": 0, "layer1_matmul_2": 1}
