"""The viewer on a sweep (`tilescope serve SWEEP_DIR`): the Sweep page's table and Pareto plot, a point
opened by the server (every page then shows its report), two points compared through compare mode's URL."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from app import state
from app.figures.sweep import sweep_figure
from app.views.sweep import sweep_points
from report_format.sweep import open_sweep
from tilescope.commands.serve import _sweep_report

pytestmark = pytest.mark.slow  # the session fixture computes three points (~15 s on the shared machine)


def test_serve_opens_a_sweep_on_its_fastest_point(small_sweep: Path) -> None:
    sweep_dir, report = _sweep_report(str(small_sweep))
    df = open_sweep(small_sweep).sweep()
    fastest = df.loc[df["samples_per_second"].idxmax()]
    assert sweep_dir == str(small_sweep) and report == str(small_sweep / fastest["report"])
    assert fastest["batch"] == 16  # the MLP's fixed costs shared by more samples
    assert _sweep_report(str(small_sweep / fastest["report"])) == (None, str(small_sweep / fastest["report"]))


def test_the_pareto_plot_marks_every_point_and_opens_it_on_click(small_sweep: Path) -> None:
    df = sweep_points(open_sweep(small_sweep))
    fig = sweep_figure(df, "batch")
    markers = [t for t in fig.data if t.mode == "markers"]
    assert sorted(int(p) for t in markers for p in t.customdata) == [0, 1, 2]
    assert [t.name for t in markers] == ["batch 1", "batch 16", "batch 4"]
    by_point = {int(t.customdata[0]): t for t in markers}
    for row in df.itertuples():
        assert by_point[row.point].y[0] == row.samples_per_second and by_point[row.point].x[0] == row.max_tile_bytes
    assert df["pareto"].sum() >= 1 and np.isfinite(df["samples_per_second"]).all()


def test_opening_a_point_switches_the_report_and_compare_uses_the_url(small_sweep: Path) -> None:
    from app.server import create_app

    _, report = _sweep_report(str(small_sweep))
    app = create_app(report, sweep_path=small_sweep)
    client = app.server.test_client()
    df = open_sweep(small_sweep).sweep()
    answer = client.get("/sweep/open?point=0")
    assert answer.status_code == 302 and urlparse(answer.headers["Location"]).path == "/"
    assert state.started_with()["active"] == str(small_sweep / df["report"][0])
    answer = client.get("/sweep/open?point=1&compare=2")
    location = urlparse(answer.headers["Location"])
    assert answer.status_code == 302 and state.started_with()["active"] == str(small_sweep / df["report"][1])
    assert parse_qs(location.query) == {"compare": [Path(df["report"][2]).name]}  # the picker's name of point 2
    for bad in ("point=7", "point=x", "point=0&compare=9", ""):
        assert client.get(f"/sweep/open?{bad}").status_code == 400
    assert state.started_with()["active"] == str(small_sweep / df["report"][1])  # unchanged by bad requests
    with pytest.raises(ValueError, match="not a report of this viewer's sweep"):
        state.select(small_sweep.parent)
    assert client.get("/sweep").status_code == 200
