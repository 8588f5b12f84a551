"""An exported model's word embedding (a Gather of rows from a [vocabulary, hidden] initializer) is
laid out as popops::createSliceableTensor lays out an embedding: its columns spread over the tiles,
each tile's columns one contiguous run. Placed whole on one tile, BERT's 30,522 x 768 table needed
94 MB of a 624 KiB tile and no exported BERT-family model ran."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from profiler.chip.targets import get_target
from profiler.frontends.onnx import Session, import_model, load_model


def _embedding(vocab: int, hidden: int, seq: int) -> onnx.ModelProto:
    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, seq])
    out = helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, [1, seq, hidden])
    table = numpy_helper.from_array(
        np.random.default_rng(0).standard_normal((vocab, hidden)).astype(np.float32), "word_embeddings.weight"
    )
    node = helper.make_node(
        "Gather", ["word_embeddings.weight", "input_ids"], ["embeddings"], name="/embeddings/Gather"
    )
    graph = helper.make_graph([node], "embed", [ids], [out], initializer=[table])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _lookup(vocab: int, hidden: int, seq: int) -> tuple[Session, np.ndarray, dict]:
    model = _embedding(vocab, hidden, seq)
    target = get_target("GC200", 1)
    imported = import_model(load_model(model), target)
    session = Session(imported)
    ids = np.random.default_rng(1).integers(0, vocab, (1, seq)).astype(np.int64)
    got = session.run({"input_ids": ids})["embeddings"]
    table = numpy_helper.to_array(model.graph.initializer[0])
    return session, got, {"want": table[ids], "table": table}


def test_the_table_is_split_as_popops_plans_an_embedding_and_the_lookup_is_exact() -> None:
    # float32 on a GC200: grains of lcm(8 B, 4 B) / 4 B = 2 columns (popops' unslicedGrainSize), 24 / 2 = 12
    # column grains, the dictionary in min(1472 // 12, ceil(50 / 2)) = 25 chunks of 2 rows: 300 tiles
    session, got, ref = _lookup(vocab=50, hidden=24, seq=7)
    np.testing.assert_array_equal(got, ref["want"])  # numpy's own indexing, written separately
    graph = session.model.graph
    (var,) = [v for v in graph.variables if v.name.startswith("word_embeddings")]
    assert tuple(var.shape) == (24, 50)  # stored [hidden, vocabulary]: a column's chunk is a contiguous run
    tiles = _element_tiles(var).reshape(24, 50).T  # [vocabulary, hidden] as the model sees it
    want = (np.arange(50)[:, None] // 2) * 12 + np.arange(24)[None, :] // 2  # block (chunk, grain) on tile
    np.testing.assert_array_equal(tiles, want)
    # the lookup's output as createSliceTensor lays it out: the 7 lookups in 25 blocks (one each here), each
    # block's columns in the table's grains, on the tiles of the table's blocks; not a column a tile
    (out,) = [v for v in graph.variables if v.name.endswith("gather out")]
    want_out = np.arange(7)[:, None] * 12 + np.arange(24)[None, :] // 2
    np.testing.assert_array_equal(_element_tiles(out).reshape(7, 24), want_out)


def test_lookups_at_the_dictionary_chunks_edges_are_exact() -> None:
    model = _embedding(50, 24, 8)
    imported = import_model(load_model(model), get_target("GC200", 1))
    ids = np.array([[0, 1, 2, 3, 47, 48, 49, 25]], np.int64)  # first and last rows of chunks
    got = Session(imported).run({"input_ids": ids})["embeddings"]
    np.testing.assert_array_equal(got, numpy_helper.to_array(model.graph.initializer[0])[ids])


def _element_tiles(var) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The tile of each element of a variable, in its stored order, from its mapping's intervals."""
    m = var.mapping
    return np.repeat(m.tiles, np.diff(np.append(m.starts, m.n)))


@pytest.mark.slow  # ~10 s: BERT-base's whole vocabulary on a GC200
def test_bert_base_word_embedding_at_full_vocabulary_fits_and_is_exact() -> None:
    session, got, ref = _lookup(vocab=30_522, hidden=768, seq=128)
    np.testing.assert_array_equal(got, ref["want"])
    assert session.engine.memory.out_of_memory_tiles().size == 0


def test_a_dictionary_that_does_not_divide_evenly_is_split_in_whole_chunks() -> None:
    from profiler.ops.slicing import lookup_plan

    # ALBERT's 512 x 128 position table in halves: 32 grains of 4 columns, 1472 // 32 = 46 chunks would be
    # 12 rows each but the last empty, so 43 chunks of 12 (the last 8)
    plan = lookup_plan(512, 128, 2, 1472)
    assert (plan.grain, plan.col_split, plan.dict_split, plan.chunk) == (4, 32, 43, 12)
    # 300 rows in float32 on a GC200: min(1472 // 12, 150) = 122 chunks would be 3 rows, so 100 of 3
    model = _embedding(300, 24, 8)
    assert lookup_plan(300, 24, 4, 1472).dict_split == 100
    ids = np.array([[299, 0, 2, 3, 297, 298, 150, 1]], np.int64)
    got = Session(import_model(load_model(model), get_target("GC200", 1))).run({"input_ids": ids})["embeddings"]
    np.testing.assert_array_equal(got, numpy_helper.to_array(model.graph.initializer[0])[ids])


def test_a_split_dictionarys_second_stage_is_one_exchange_of_a_region_per_peer() -> None:
    # float32 on a GC200, 50 x 24: 12 column grains of 2, 25 dictionary chunks of 2 rows (as above). 30 lookups
    # in blocks of ceil(30 / 25) = 2: 15 blocks. PopLibs' multiSlice (lib/popops/DynamicSlice.cpp) runs stage 0
    # and stage 1 as two compute sets, its stage-0 output and the result created partition by partition
    # contiguous (createPartitionableTensor), so tile (i, u) reads its 2 lookups' candidates from the 24 other
    # chunks' tiles as 24 regions, and what it sends of its own chunk's candidates (every block's but its own)
    # is one or two runs of its memory (a region sent is counted once, however many tiles receive it).
    session, got, ref = _lookup(vocab=50, hidden=24, seq=30)
    np.testing.assert_array_equal(got, ref["want"])
    compiled = session.engine.compiled
    assert compiled is not None
    stages = [s for s in compiled.steps if s.name == "multi slice/Exchange"]
    assert len(stages) == 2  # stage 0 (the indices to every block's tile), stage 1: not a copy and 24 adds
    code = stages[1].cost.code_bytes
    assert code is not None
    # 4 B an instruction x (6 + 24 regions in + 1 or 2 out + the adjusted indices: at most 4 regions in and
    # out); held row by row, each of the 2 rows from each peer and each row sent was a region
    tiles = np.arange(15)[:, None] * 12 + np.arange(12)
    assert code[tiles].max() <= 4 * (6 + 24 + 2 + 4)
    assert code[tiles].min() >= 4 * (6 + 24 + 1)
    # each tile's block of the result is one interval of its variable
    (out,) = [v for v in session.model.graph.variables if v.name.endswith("gather out")]
    assert np.unique(out.mapping.tiles).size == out.mapping.tiles.size == 15 * 12


def test_the_lookups_indices_input_is_created_as_create_indices_tensor_maps_it() -> None:
    # a graph input a Gather reads as its indices is PopART's to create (GatherOpx::createInput:
    # popops::createIndicesTensor): linear with at least 32 indices a tile (DynamicSlice.cpp
    # minIndicesPerTile), so the 200 lookups sit on tiles 0-6 (32 each, 8 on the last), and every table
    # tile reads them from 7 tiles, not from 200; the lookup stays exact
    session, got, ref = _lookup(vocab=50, hidden=24, seq=200)
    np.testing.assert_array_equal(got, ref["want"])
    (ids,) = [v for v in session.model.graph.variables if v.name == "input_ids"]
    np.testing.assert_array_equal(_element_tiles(ids), np.arange(200) // 32)
    stage0 = next(s for s in session.engine.compiled.steps if s.name == "multi slice/Exchange")
    # a table tile holding no index (tile 299) receives the 200 in 7 regions, one from each tile holding
    # them: 4 B x (6 + 7) of exchange code (cost_model.exchange_code_bytes)
    assert int(stage0.cost.code_bytes[299]) == 4 * (6 + 7)
