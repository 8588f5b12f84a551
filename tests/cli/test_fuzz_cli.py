"""Properties: the command line, POPLAR_ENGINE_OPTIONS, typed tile lists and the viewer's request
check, given arbitrary input, end only in their documented ways.

* ``tilescope`` (argv from the real verbs, options and awkward values): exit status 0, 1 or 2
  (argparse's own errors exit 2), never an exception, never a traceback on stderr;
* ``resolve_options``: OptionError (one line) or options;
* ``parse_tile_list``: ValueError (one line) or tiles in range;
* ``app.guard.check_callback_request``: BadRequest (one line) or accepted.

Budget: max_examples per property below, a few seconds each on one core.
"""

from __future__ import annotations

import json

import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.guard import BadRequest, check_callback_request
from app.tile_list import parse_tile_list
from profiler.capture.options import OPTION_NAMES, OptionError, resolve_options
from profiler.frontends.onnx import examples
from report_format.synthetic import synthetic_report
from tilescope.cli import main

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
AWKWARD = [
    "",
    "-1",
    "0",
    "1",
    "3",
    "99999999999999999999",
    "nan",
    "1e9",
    "x",
    "../",
    "/proc/x",
    "/",
    " ",
    "0-3,5",
    "a=b",
]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("fuzz-cli")
    onnx.save(examples.mlp((8, 4, 2)), d / "m.onnx")
    (d / "junk.onnx").write_bytes(b"junk")
    (d / "afile").write_text("x")
    return {
        "report": str(synthetic_report(d / "r", num_ipus=2, tiles_per_ipu=8)),
        "model": str(d / "m.onnx"),
        "junk": str(d / "junk.onnx"),
        "file": str(d / "afile"),
        "out": str(d / "out" / "o.json"),
        "dir": str(d),
    }


VERB_ARGS = {
    "summary": ["{report}", "--json", "--verify"],
    "dump": ["{report}", "runs", "tile_memory", "nope", "--format", "json", "csv"],
    "diff": ["{report}", "{report}", "--json", "--top", "--fail-if", "execution.total_cycles>+5%", "--run", "--layer", "--html", "{out}"],
    "export": ["{report}", "--trace", "{out}", "--run", "--tiles"],
    "sweep": ["{model}", "{junk}", "--batch", "1,2", "--dtype", "float16,float32", "--available-memory-proportion", "0.2,1.5", "--workers", "--out", "{dir}/sw", "--json"],
    "run": ["{model}", "{junk}", "--target", "IPUModel", "Bow", "--ipus", "--batch", "--dtype", "float16", "--runs", "--inputs", "{file}", "--save-outputs", "{out}", "--report-dir", "{dir}", "--json"],
}  # fmt: skip


@pytest.mark.slow  # 200 examples, ~1.7 s at load 4
@SETTINGS
@given(data=st.data())
def test_the_command_line_ends_only_in_its_exit_codes(files: dict[str, str], data, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")
    # a bare word can land as an output path (``--save-outputs Bow``): relative paths stay in the test's files
    monkeypatch.chdir(files["dir"])
    verb = data.draw(st.sampled_from(sorted(VERB_ARGS)))
    words = [w.format(**files) for w in VERB_ARGS[verb]] + AWKWARD
    argv = [verb, *data.draw(st.lists(st.sampled_from(words), max_size=7))]
    if verb == "run":
        argv.insert(1, data.draw(st.sampled_from([files["model"], files["junk"], files["file"]])))
        argv += ["--ipus", data.draw(st.sampled_from(["1", "2"]))]  # keep each simulation small
    if verb == "sweep":
        argv.insert(1, data.draw(st.sampled_from([files["model"], files["junk"], files["file"]])))
        # a grid that passes every check would start a Dask cluster (~14 s a sweep): a last grid value
        # that run refuses is refused when the grid is checked, after the other options are parsed
        # (tests/sweep run real sweeps)
        argv += ["--available-memory-proportion", "2"]
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse: usage errors exit 2, --help exits 0
        status = exc.code if isinstance(exc.code, int) else 2
    err = capsys.readouterr().err
    assert status in (0, 1, 2), (argv, status)
    assert "Traceback" not in err, argv


@pytest.mark.slow  # 300 examples, ~2.7 s at load 4
@settings(max_examples=300, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.dictionaries(
            st.one_of(st.sampled_from(OPTION_NAMES), st.text(max_size=10)),
            st.one_of(
                st.text(max_size=10), st.booleans(), st.integers(), st.floats(), st.none(), st.lists(st.integers())
            ),
            max_size=4,
        ).map(json.dumps),
    )
)
def test_engine_options_raise_only_option_errors(text: str) -> None:
    try:
        resolve_options(environ={"POPLAR_ENGINE_OPTIONS": text})
    except OptionError as exc:
        assert "\n" not in str(exc)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789-,; x", max_size=30), st.integers(1, 5000))
def test_tile_lists_raise_only_value_errors(text: str, num_tiles: int) -> None:
    try:
        tiles = parse_tile_list(text, num_tiles)
    except ValueError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(0 <= t < num_tiles for t in tiles)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
)
argument = st.fixed_dictionaries(
    {"id": st.one_of(st.text(max_size=20), json_values), "property": st.one_of(st.text(max_size=12), json_values),
     "value": json_values}
)  # fmt: skip


@pytest.mark.slow  # 400 examples, ~3.8 s at load 4
@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"output": st.sampled_from(["known.children", "other"]), "inputs": st.one_of(st.lists(argument, max_size=3), json_values),
             "state": st.lists(argument, max_size=3)}
        ),
    )
)  # fmt: skip
def test_the_request_check_raises_only_bad_request(body: object) -> None:
    try:
        check_callback_request(body, {"known.children": {}}, frozenset({"grid"}), "big-grid")
    except BadRequest as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
