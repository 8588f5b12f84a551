"""`tilescope demo --no-serve` makes every sample report, and each one reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.views.summary import summary
from report_format.reader import open_report
from tilescope.cli import main
from tilescope.samples import SAMPLES


@pytest.mark.slow
def test_demo_makes_every_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--no-serve", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert f"[{len(SAMPLES)}/{len(SAMPLES)}]" in err
    for sample in SAMPLES:
        s = summary(open_report(tmp_path / sample.name))
        if sample.name == "mlp_oom":
            assert s["memory"]["out_of_memory_tiles"] > 0 and not s["execution"]["captured"]
            assert any("out of memory" in n for n in s["notes"])
        else:
            assert s["memory"]["out_of_memory_tiles"] == 0 and s["execution"]["total_cycles"] > 0
    # the batch-64 MLP moves more data and does more work than the batch-32 one
    small, big = (summary(open_report(tmp_path / n))["execution"] for n in ("mlp", "mlp_batch64"))
    assert big["total_flops"] > small["total_flops"] and big["total_cycles"] > small["total_cycles"]
