"""`tilescope diff`: JSON contract, text output, HTML export and the exit codes of --fail-if.

The pair: active inserts one 300-cycle, 500-FLOP op into the 2390-cycle base model (+12.55%
cycles) and one 1024-byte variable on tile 3.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from compare_builders import Spec, Step, Var, build_report, mlp_steps

from app.comparison.metrics import numeric_metrics
from app.views.summary import REQUIRED_KEYS, summary
from report_format.reader import open_report
from tilescope.cli import main


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("diff")
    cast = Step("OnTileExecute", "cast_1", "cast_1", cycles=300, flops=500)
    b = build_report(root / "baseline", Spec(mlp_steps(), [Var("w", 4096, "matmul_1", tile=1)]))
    a = build_report(
        root / "active",
        Spec(mlp_steps(extra=[(6, cast)]), [Var("w", 4096, "matmul_1", tile=1), Var("c", 1024, "cast_1", tile=3)]),
    )
    return str(b), str(a)


def test_json_contract(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *pair, "--json", "--top", "3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["baseline"]["path"] == str(Path(pair[0]).absolute())
    assert doc["active"]["target"]["name"] == "IPUModel" and doc["active"]["engine"] == "test"
    assert doc["parity"] == []
    # every numeric metric of `tilescope summary --json`, for both sides
    for path, side in ((pair[0], "baseline"), (pair[1], "active")):
        flat = numeric_metrics(summary(open_report(path)))
        for k, v in flat.items():
            assert doc["metrics"][k][side] == v, k
    numeric_required = [k for k in REQUIRED_KEYS if k != "target.name"]
    assert set(numeric_required) <= set(doc["metrics"])
    cyc = doc["metrics"]["execution.total_cycles"]
    assert cyc == {"baseline": 2390, "active": 2690, "delta": 300, "ratio": pytest.approx(2690 / 2390)}
    assert doc["metrics"]["memory.out_of_memory_tiles"]["ratio"] is None  # 0 -> 0
    assert doc["steps"] == {"same": 12, "added": 1, "removed": 0}
    assert doc["top"]["steps_added_removed"] == [
        {"baseline_step": -1, "active_step": 6, "status": "added", "type": "OnTileExecute", "name": "model (cast_1)"}
    ]
    assert doc["top"]["variables"][0]["name"] == "c" and len(doc["top"]["operations_by_cycles"]) == 1
    assert doc["thresholds"] == []


def test_text_output(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *pair]) == 0
    out = capsys.readouterr().out
    assert "parity: same target and engine options" in out
    assert "execution.total_cycles" in out and "+300 (+12.55%)" in out
    assert "program steps: 12 in both, 1 only in active, 0 only in baseline" in out
    assert "added    active step 6 OnTileExecute model (cast_1)" in out  # the model's name first


@pytest.mark.parametrize(
    ("exprs", "code"),
    [
        (["execution.total_cycles>+5%"], 1),  # +12.55%
        (["execution.total_cycles>+20%"], 0),
        (["execution.total_cycles>=+300"], 1),  # signed: the change
        (["execution.total_cycles>+300"], 0),
        (["execution.total_cycles>2600"], 1),  # unsigned: the active value (2690)
        (["execution.total_cycles>2690"], 0),
        (["execution.total_flops<-1%"], 0),  # FLOPs grew
        (["execution.total_cycles<-1%"], 0),
        (["memory.out_of_memory_tiles>0"], 0),
        (["memory.max_tile_bytes>600000", "memory.category.variable>+1000"], 1),  # second one crossed
        (["graph.program_steps>+0"], 1),
    ],
)
def test_fail_if_exit_codes(
    pair: tuple[str, str], exprs: list[str], code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["diff", *pair, "--json"]
    for e in exprs:
        args += ["--fail-if", e]
    assert main(args) == code
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    crossed = [t["expression"] for t in doc["thresholds"] if t["crossed"]]
    assert bool(crossed) == (code == 1)
    for e in crossed:
        assert f"threshold crossed: {e}" in captured.err


def test_relative_threshold_from_zero_baseline(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    # no tile was out of memory in either: 0 -> 0 is a 0% change, not crossed
    assert main(["diff", *pair, "--fail-if", "memory.out_of_memory_tiles>+0%"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("execution.total_cyles>+5%", "did you mean execution.total_cycles"),
        ("execution.total_cycles=5", "malformed --fail-if 'execution.total_cycles=5'"),
        ("execution.total_cycles>fast", "malformed --fail-if"),
        ("execution.total_cycles>1.2.3%", "is not a number"),
        ("no.such.metric.at.all>1", "unknown metric 'no.such.metric.at.all'"),
    ],
)
def test_bad_fail_if_is_exit_2_with_one_line(
    pair: tuple[str, str], expr: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", *pair, "--fail-if", expr]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_layer_option(pair: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", *pair, "--json", "--layer", "onnx"]) == 0
    ops = json.loads(capsys.readouterr().out)["top"]["operations_by_cycles"]
    assert [o["key"] for o in ops] == ["onnx:model(Model)"] and ops[0]["delta_cycles"] == 300
    assert main(["diff", *pair, "--layer", "tensorflow"]) == 2
    assert "they have: onnx, poplibs" in capsys.readouterr().err


def test_missing_report_is_exit_2(pair: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", pair[0], str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_html_export_is_self_contained(
    pair: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sub" / "cmp.html"
    assert main(["diff", *pair, "--html", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    # nothing is fetched: no external script or stylesheet (plotly.js is inlined once)
    assert not re.search(r"<script[^>]*\ssrc=|<link[^>]*href=[\"']https?:", text)
    assert text.count("Plotly.newPlot") >= 5
    assert text.count("plotly.js v") == 1
    assert "cast_1" in text and "execution.total_cycles" in text and "Same target and engine options" in text
