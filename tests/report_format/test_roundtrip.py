"""Writer -> reader roundtrip, and the report read without tilescope (plain pyarrow / pandas)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from report_format import schema
from report_format.errors import ReportError
from report_format.reader import open_report
from report_format.spec import render
from report_format.writer import ReportWriter


def test_every_table_opens_with_plain_pyarrow_and_pandas(small_report: Path) -> None:
    manifest = json.loads((small_report / "manifest.json").read_text())
    spec_text = (Path(schema.__file__).parent / "SPEC.md").read_text()
    for name, entry in manifest["tables"].items():
        with pa.memory_map(str(small_report / entry["file"])) as source:
            table = pa.ipc.open_file(source).read_all()
        assert table.num_rows == entry["rows"]
        df = table.to_pandas()
        assert isinstance(df, pd.DataFrame)
        assert f"### `{name}`" in spec_text
        section = spec_text.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        for column in table.column_names:  # SPEC.md describes every column found in the file
            assert f"| `{column}` |" in section, f"{name}.{column} not in SPEC.md"
        meta = json.loads(table.schema.metadata[schema.METADATA_KEY.encode()])
        assert meta["table"] == name and meta["format_version"] == schema.FORMAT_VERSION


def test_spec_md_is_generated_from_schema() -> None:
    committed = (Path(schema.__file__).parent / "SPEC.md").read_text()
    assert committed == render(), "SPEC.md is stale: python -m report_format.spec > report_format/SPEC.md"


def test_roundtrip_values_and_lazy_step_access(tmp_path: Path) -> None:
    cycles = np.arange(5 * 3 * 4, dtype=np.int32).reshape(5 * 3, 4)  # 5 steps x 3 IPUs x 4 tiles
    with ReportWriter(tmp_path / "r", engine="e") as w:
        w.write("target", _target(num_ipus=3, tiles_per_ipu=4))
        w.write("runs", {"run": [0], "program_id": [0], "name": ["r0"], "cycles": [99], "flops": [7], "steps": [5]})
        for first in range(0, 15, 4):  # uneven appends are re-batched
            w.append(
                "tile_cycles",
                {
                    "run": np.zeros(len(cycles[first : first + 4]), dtype=np.int32),
                    "step": np.arange(15)[first : first + 4] // 3,
                    "ipu": np.arange(15)[first : first + 4] % 3,
                    "cycles": cycles[first : first + 4],
                },
            )
    r = open_report(tmp_path / "r")
    assert r.target().num_ipus == 3
    np.testing.assert_array_equal(r.tile_cycles(0, 2), cycles[6:9])
    np.testing.assert_array_equal(r.tile_cycles(0, 4, ipu=1), cycles[13])
    np.testing.assert_array_equal(r.tile_cycles_range(0, 1, 4, ipu=2), cycles[[5, 8, 11]])
    with pytest.raises(ReportError, match="no run 3"):
        r.tile_cycles(3, 0)
    r.verify()


def test_writer_names_missing_and_extra_columns(tmp_path: Path) -> None:
    w = ReportWriter(tmp_path / "r")
    with pytest.raises(ReportError, match=r"missing \['steps'\].*unexpected \['stepz'\]"):
        w.write("runs", {"run": [0], "program_id": [0], "name": ["a"], "cycles": [1], "flops": [0], "stepz": [1]})
    w.abort()
    assert not (tmp_path / "r").exists()


def _target(num_ipus: int = 1, tiles_per_ipu: int = 4) -> dict[str, list]:
    return {
        "name": ["IPUModel"],
        "type": ["IPUModel"],
        "architecture": ["ipu2"],
        "num_ipus": [num_ipus],
        "tiles_per_ipu": [tiles_per_ipu],
        "num_tiles": [num_ipus * tiles_per_ipu],
        "bytes_per_tile": [1024],
        "bytes_per_ipu": [1024 * tiles_per_ipu],
        "total_memory": [1024 * tiles_per_ipu * num_ipus],
        "clock_hz": [1.33e9],
        "num_replicas": [1],
        "ipus_per_replica": [num_ipus],
        "num_worker_contexts": [6],
        "exchange_bytes_per_cycle": [4.0],
        "interleaved_memory_start": [512],
        "fp16_flops_per_cycle": [128.0],
        "fp32_flops_per_cycle": [32.0],
    }


def test_column_projection_reads_the_same_values(small_report: Path) -> None:
    full = open_report(small_report).table("vertices")
    part = open_report(small_report).table("vertices", ["count", "tile"])
    assert part.column_names == ["count", "tile"]
    assert part.equals(full.select(["count", "tile"]))
    with pytest.raises(ReportError, match=r"no columns \['nope'\]"):
        open_report(small_report).table("vertices", ["nope"])
