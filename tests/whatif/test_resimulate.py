"""The viewer's re-simulation runner (app.resimulate): off unless allowed, one at a time, bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import resimulate
from tests.whatif.test_whatif_cli import save_mlp, tilescope


@pytest.fixture
def allowed():
    resimulate.allow(True)
    yield
    resimulate.allow(False)


def test_refused_unless_the_server_allows_it() -> None:
    resimulate.allow(False)
    assert "tilescope serve --allow-resimulate" in resimulate.start("/nowhere", 1)


@pytest.mark.slow
def test_one_at_a_time_then_the_result(allowed, tmp_path: Path) -> None:
    model = save_mlp(tmp_path / "mlp.onnx")
    assert tilescope("run", str(model), "--target", "IPUModel", "--batch", "4", "--report-dir", str(tmp_path / "r"),
                     ).returncode == 0  # fmt: skip
    assert resimulate.start(tmp_path / "r", 1) == ""
    assert resimulate.start(tmp_path / "r", 1) == "what-if 1 is still running; one at a time"
    done = resimulate.wait(300)
    assert done["state"] == "done", done
    assert done["result"]["change"] == {"batch": 8}
    assert done["result"]["whatif_report"] == f"{tmp_path / 'r'}.whatif-1"


def test_a_failing_what_if_says_why(allowed, tmp_path: Path) -> None:
    from report_format.synthetic import synthetic_report

    old = synthetic_report(tmp_path / "old", num_ipus=1, tiles_per_ipu=4)
    assert resimulate.start(old, 1) == ""
    done = resimulate.wait(120)
    assert done["state"] == "failed" and "records no origin" in done["error"]


def test_a_run_past_the_time_limit_is_killed(allowed, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resimulate, "TIMEOUT_S", 0.0)
    monkeypatch.setattr(resimulate, "command", lambda report, n: ["sleep", "30"])
    assert resimulate.start(tmp_path, 1) == ""
    done = resimulate.status()
    assert done["state"] == "failed" and "time limit" in done["error"]


def test_the_status_is_never_served_from_the_response_cache() -> None:
    from app import ids
    from app.response_cache import _uncached

    status = {"id": ids.INSIGHTS_WHATIF_STATUS, "property": "children"}
    poll = {"id": ids.INSIGHTS_WHATIF_POLL, "property": "disabled"}
    assert _uncached({"outputs": [status, poll]})
    assert not _uncached({"outputs": {"id": {"type": "big-grid", "kind": "k", "args": "{}"}, "property": "x"}})
    assert not _uncached({"outputs": {"id": ids.INSIGHTS_BODY, "property": "children"}})
