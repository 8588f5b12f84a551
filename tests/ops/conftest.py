"""Every ops test runs twice: with the compute sets' kernels (the default) and with every vertex's
codelet (tilescope.executeVertices), each checked against the test's own numpy reference."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(autouse=True, params=["kernels", "vertices"])
def execution(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "vertices":
        monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"tilescope.executeVertices": "true"}))
    else:
        monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    return request.param
