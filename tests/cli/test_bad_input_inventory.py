"""The bad-input inventory (docs/robustness.md): one row per input a new (or careless) user may
give. Each row runs the real command and checks its exit status, that the last line of stderr is
the one-line error it promises, that no traceback is printed, and that no file the user owns is
touched. A row id here is a row of the table in docs/robustness.md (a test checks both agree).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from profiler.frontends.onnx import examples
from report_format.synthetic import synthetic_report
from tilescope.cli import main

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Env:
    """Files a row may refer to as {name} in its arguments."""

    tmp: Path
    paths: dict[str, str] = field(default_factory=dict)


def _model(env: Env) -> None:
    onnx.save(examples.mlp((64, 32, 10)), env.tmp / "mlp.onnx")
    env.paths["model"] = str(env.tmp / "mlp.onnx")


def _report(env: Env) -> None:
    env.paths["report"] = str(synthetic_report(env.tmp / "report", num_ipus=2, tiles_per_ipu=16))


def _file(name: str, data: bytes) -> Callable[[Env], None]:
    def make(env: Env) -> None:
        (env.tmp / name).write_bytes(data)
        env.paths[name.replace(".", "_")] = str(env.tmp / name)

    return make


def _npz(name: str, **arrays: np.ndarray) -> Callable[[Env], None]:
    def make(env: Env) -> None:
        np.savez(env.tmp / name, **arrays)  # type: ignore[arg-type]
        env.paths[name.replace(".", "_")] = str(env.tmp / name)

    return make


def _web_project(env: Env) -> None:
    site = env.tmp / "site"
    (site / "src").mkdir(parents=True)
    (site / "manifest.json").write_text('{"name": "app"}')
    (site / "index.html").write_text("<html></html>")
    (site / "src" / "main.js").write_text("1")
    env.paths["site"] = str(site)


def _unsupported(env: Env) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), env.tmp / "odd.onnx")
    env.paths["odd"] = str(env.tmp / "odd.onnx")


def _edit_manifest(fn: Callable[[dict], None]) -> Callable[[Env], None]:
    def make(env: Env) -> None:
        _report(env)
        path = Path(env.paths["report"]) / "manifest.json"
        doc = json.loads(path.read_text())
        fn(doc)
        path.write_text(json.dumps(doc))

    return make


def _with_origin(kind: str = "model", model: str = "gone", oom: bool = False) -> Callable[[Env], None]:
    """A report whose manifest records an origin (report_format.origin): a model (or script) that is
    ``gone``, ``same`` (the file as recorded) or ``changed`` since; ``oom`` gives it what-if proposals
    (tiles out of memory: a lower available-memory proportion, more IPUs)."""

    def make(env: Env) -> None:
        import hashlib

        report = synthetic_report(env.tmp / "report", num_ipus=1 if oom else 2, tiles_per_ipu=16, oom_tiles=2 * oom)
        source = env.tmp / ("mlp.onnx" if kind == "model" else "train.py")
        if model != "gone":
            source.write_bytes(b"x")
        recorded = b"x" if model == "same" else b"y"
        doc = json.loads((report / "manifest.json").read_text())
        doc["origin"] = {
            "kind": kind,
            "path": str(source),
            "sha256": hashlib.sha256(recorded).hexdigest(),
            "bytes": len(recorded),
            "options": {"target": "GC200", "ipus": 1, "batch": 1, "available_memory_proportion": 0.6},
        }
        (report / "manifest.json").write_text(json.dumps(doc))
        env.paths["report"] = str(report)

    return make


def _inconsistent(env: Env) -> None:
    _report(env)
    big = synthetic_report(env.tmp / "big", tiles_per_ipu=1472)
    rep = Path(env.paths["report"])
    shutil.copy(big / "tile_memory.arrow", rep / "tile_memory.arrow")
    doc = json.loads((rep / "manifest.json").read_text())
    other = json.loads((big / "manifest.json").read_text())
    doc["tables"]["tile_memory"] = other["tables"]["tile_memory"]  # the manifest updated by hand
    (rep / "manifest.json").write_text(json.dumps(doc))


def _damaged(env: Env) -> None:
    _report(env)
    f = Path(env.paths["report"]) / "vertices.arrow"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.write_bytes(bytes(data))


def _user_directory(name: str) -> Callable[[Env], None]:
    def make(env: Env) -> None:  # a directory of the user's where a sample report would go
        (env.tmp / name).mkdir()
        (env.tmp / name / "notes.txt").write_text("mine")

    return make


def _nested_report(env: Env) -> None:  # what a named engine leaves: DIR/<engine name>/manifest.json
    synthetic_report(env.tmp / "outer" / "mlp", tiles_per_ipu=16)


def _future_opset(env: Env) -> None:
    model = examples.mlp((4, 2))
    model.opset_import[0].version = 99
    onnx.save(model, env.tmp / "future.onnx")
    env.paths["future"] = str(env.tmp / "future.onnx")


def _one_node(
    name: str, op: str, shape: list[int], const: list[int], out: str = "y", **attrs: object
) -> Callable[[Env], None]:
    """A model of one ``op`` node on input x (``shape``) and an int64 initializer ``s`` (``const``)."""

    def make(env: Env) -> None:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        y = helper.make_tensor_value_info(out, TensorProto.FLOAT, ["a", "b"])
        inputs = ["s"] if op == "ConstantOfShape" else ["x", "s"]
        nodes = [helper.make_node(op, inputs, [out if op != "ConstantOfShape" else "c"], **attrs)]
        if op == "ConstantOfShape":
            nodes.append(helper.make_node("Add", ["x", "c"], [out]))
        init = [helper.make_tensor("s", TensorProto.INT64, [len(const)], const)]
        graph = helper.make_graph(nodes, "g", [x], [y], initializer=init)
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), env.tmp / name)
        env.paths[name.replace(".", "_")] = str(env.tmp / name)

    return make


def _input_dims(name: str, dims: list[int]) -> Callable[[Env], None]:
    """A Relu model whose input and output declare ``dims`` (0 and negative sizes included)."""

    def make(env: Env) -> None:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), env.tmp / name)
        env.paths[name.replace(".", "_")] = str(env.tmp / name)

    return make


def _npz_member(name: str, member: bytes, compress: bool = False) -> Callable[[Env], None]:
    """A .npz whose one member ``input.npy`` holds ``member`` as given (a crafted header)."""

    def make(env: Env) -> None:
        import zipfile

        with zipfile.ZipFile(env.tmp / name, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
            z.writestr("input.npy", member)
        env.paths[name.replace(".", "_")] = str(env.tmp / name)

    return make


def _npy_header(shape: tuple[int, ...]) -> bytes:
    import io

    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": "<f4", "fortran_order": False, "shape": shape})
    return out.getvalue()


def _symlink_to_report(env: Env) -> None:  # the swap must neither replace the link nor empty the report
    (env.tmp / "report_link").symlink_to(env.paths["report"])
    env.paths["report_link"] = str(env.tmp / "report_link")


def _fifo(env: Env) -> None:  # a FIFO of the test's own (never the machine's device files)
    os.mkfifo(env.tmp / "fifo")
    env.paths["fifo"] = str(env.tmp / "fifo")


def _fifo_report(env: Env) -> None:  # a directory whose manifest.json is a FIFO: reading it would block
    (env.tmp / "fiforep").mkdir()
    os.mkfifo(env.tmp / "fiforep" / "manifest.json")
    env.paths["fifo_report"] = str(env.tmp / "fiforep")


def _symlink(name: str, target: str) -> Callable[[Env], None]:
    def make(env: Env) -> None:
        (env.tmp / name).symlink_to(env.tmp / target)
        env.paths[name] = str(env.tmp / name)

    return make


def _overwrite(key: str, name: str, data: bytes) -> Callable[[Env], None]:
    def make(env: Env) -> None:
        (Path(env.paths[key]) / name).write_bytes(data)

    return make


def _port_in_use(env: Env) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    env.paths["busy_port"] = str(sock.getsockname()[1])
    env.paths["_socket"] = sock  # type: ignore[assignment]  # kept open for the row


@dataclass
class Row:
    id: str
    argv: list[str]
    status: int
    says: str  # in the last line of stderr
    setup: list[Callable[[Env], None]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


M = [_model]
ROWS = [
    # -- options ---------------------------------------------------------------------------------
    Row("run-no-model", ["run"], 2, "no model given", []),
    Row("runs-zero", ["run", "{model}", "--runs", "0"], 2, "--runs must be between 1 and 100,000, got 0", M),
    # tilescope model's --out given to run: named as given, not taken as an abbreviation of --outline
    Row("run-out", ["run", "{model}", "--out", "{tmp}/rep"], 2, "unrecognized arguments: --out", M),
    Row("runs-huge", ["run", "{model}", "--runs", "9" * 20], 2, "--runs must be between 1 and 100,000", M),
    Row(
        "micro-batches-zero",
        ["run", "{model}", "--ipus", "2", "--pipeline", "--micro-batches", "0"],
        2,
        "--micro-batches must be >= 1, got 0",
        M,
    ),
    Row("options-nested", ["run", "{model}"], 2, "nested too deeply", M, {"POPLAR_ENGINE_OPTIONS": "[" * 100_000}),
    Row(
        "options-directory-nul",
        ["run", "{model}"],
        2,
        "the path holds a NUL byte",
        M,
        {"POPLAR_ENGINE_OPTIONS": '{"autoReport.all": "true", "autoReport.directory": "rep\\u0000x"}'},
    ),
    Row(
        "diff-fail-if-overflow",
        ["diff", "{report}", "{report}", "--fail-if", "execution.total_cycles>1e999999"],
        2,
        "is not a finite number",
        [_report],
    ),
    Row("ipus-zero", ["run", "{model}", "--ipus", "0"], 2, "num_ipus must be >= 1", M),
    Row("ipus-too-many", ["run", "{model}", "--ipus", "100000"], 2, "at most 256 IPUs", M),
    Row("ipus-c600", ["run", "{model}", "--target", "C600", "--ipus", "16"], 2, "at most 8 IPUs", M),
    Row("target-unknown", ["run", "{model}", "--target", "GC9000"], 2, "unknown target 'GC9000'", M),
    Row("batch-zero", ["run", "{model}", "--batch", "0"], 2, "batch size must be >= 1", M),
    Row("batch-huge", ["run", "{model}", "--batch", "1000000000000"], 2, "GB more host memory", M),
    Row("batch-past-int64", ["run", "{model}", "--batch", "10" * 10], 2, "larger than an ONNX dimension", M),
    Row("options-json", ["run", "{model}"], 2, "POPLAR_ENGINE_OPTIONS", M, {"POPLAR_ENGINE_OPTIONS": "{bad"}),
    Row("options-unknown", ["run", "{model}"], 2, "unknown", M, {"POPLAR_ENGINE_OPTIONS": '{"autoReport.nope": "1"}'}),
    Row(
        "options-replica-to-profile",
        ["run", "{model}"],
        2,
        "profiler.replicaToProfile is 5; the graph has 1 replica(s)",
        M,
        {"POPLAR_ENGINE_OPTIONS": '{"profiler.replicaToProfile": "5"}'},
    ),
    # tilescope sweep checks its whole grid with run's own parser before any point starts
    Row("sweep-value", ["sweep", "{model}", "--batch", "1,x", "--out", "{tmp}/sw"], 2, "invalid int value: 'x'", M),
    Row(
        "sweep-batch-zero", ["sweep", "{model}", "--batch", "1,0", "--out", "{tmp}/sw"], 2, "batch size must be >= 1", M
    ),
    Row("sweep-empty-value", ["sweep", "{model}", "--batch", ",", "--out", "{tmp}/sw"], 2, "an empty value", M),
    Row("sweep-repeated", ["sweep", "{model}", "--dtype", "float16,float16", "--out", "{tmp}/sw"], 2, "given twice", M),
    Row(
        "sweep-amp",
        ["sweep", "{model}", "--available-memory-proportion", "0.2,1.5", "--out", "{tmp}/sw"],
        2,
        "must be in (0, 1], got 1.5",
        M,
    ),
    Row("sweep-target", ["sweep", "{model}", "--target", "C600,Nope", "--out", "{tmp}/sw"], 2, "unknown target", M),
    Row("sweep-workers", ["sweep", "{model}", "--workers", "0", "--out", "{tmp}/sw"], 2, "between 1 and 256", M),
    Row("sweep-out", ["sweep", "{model}", "--out", "/proc/x"], 2, "--out /proc/x: cannot create it", M),
    Row("sweep-model", ["sweep", "{tmp}/nope.onnx", "--out", "{tmp}/sw"], 2, "no such file", []),
    Row("diff-top", ["diff", "{report}", "{report}", "--top", "-1"], 2, "--top must be 0 or more", [_report]),
    Row("diff-run", ["diff", "{report}", "{report}", "--run", "5"], 2, "has no run 5", [_report]),
    Row("dump-limit", ["dump", "{report}", "tile_memory", "--limit", "-3"], 2, "--limit must be 0 or more", [_report]),
    Row("diff-fail-if", ["diff", "{report}", "{report}", "--fail-if", "cycles~5"], 2, "--fail-if", [_report]),
    Row("export-tiles", ["export", "{report}", "--trace", "{tmp}/t.json", "--tiles", "x"], 2, "tile list", [_report]),
    Row(
        "serve-port-negative",
        ["serve", "{report}", "--port", "-1", "--no-browser"],
        2,
        "between 1 and 65535",
        [_report],
    ),
    Row(
        "serve-port-huge", ["serve", "{report}", "--port", "70000", "--no-browser"], 2, "between 1 and 65535", [_report]
    ),
    Row(
        "serve-port-in-use",
        ["serve", "{report}", "--port", "{busy_port}", "--no-browser"],
        2,
        "Address already in use",
        [_report, _port_in_use],
    ),
    Row("serve-threads", ["serve", "{report}", "--threads", "0", "--no-browser"], 2, "between 1 and 256", [_report]),
    Row("serve-host", ["serve", "{report}", "--host", "no-such-host.invalid", "--no-browser"], 2, "--host", [_report]),
    # -- models ----------------------------------------------------------------------------------
    Row("model-missing", ["run", "{tmp}/none.onnx"], 2, "no such file", []),
    Row("model-directory", ["run", "{tmp}"], 2, "is a directory", []),
    Row(
        "model-name-escapes",
        ["run", "{tmp}/\x1b[2J\x1b[31mred\n.onnx"],
        2,
        "\\x1b[2J\\x1b[31mred\\n.onnx: no such file",
        [],
    ),
    Row("model-fifo", ["run", "{fifo}"], 2, "is not a regular file", [_fifo]),
    Row("model-opset-99", ["run", "{future}"], 2, "opset 99 is newer than any ONNX defines", [_future_opset]),
    Row("model-garbage", ["run", "{junk_onnx}"], 2, "junk.onnx", [_file("junk.onnx", b"\x00\x01garbage" * 50)]),
    Row("model-empty", ["run", "{empty_onnx}"], 2, "empty.onnx", [_file("empty.onnx", b"")]),
    Row("model-unsupported-op", ["run", "{odd}"], 2, "NoSuchOp", [_unsupported]),
    Row(
        "model-expand-huge",
        ["run", "{expand_onnx}"],
        2,
        "(Expand, output [1000000, 1000000], 4,000,000,000,000 bytes): more than the whole target's tile memory",
        [_one_node("expand.onnx", "Expand", [1, 1], [1_000_000, 1_000_000])],
    ),
    Row(
        "model-tile-huge",
        ["run", "{tile_onnx}"],
        2,
        "(Tile, output [1, 4000000000], 16,000,000,000 bytes): more than the whole target's tile memory",
        [_one_node("tile.onnx", "Tile", [1, 4], [1, 1_000_000_000])],
    ),
    Row(
        "model-constant-huge",
        ["run", "{constant_onnx}"],
        2,
        "(ConstantOfShape, output [100000, 10000000], 4,000,000,000,000 bytes) needs about 4000.0 GB more host memory",
        [_one_node("constant.onnx", "ConstantOfShape", [1, 1], [100_000, 10_000_000])],
    ),
    Row(
        "model-batch-zero",
        ["run", "{zero_onnx}"],
        2,
        "input 'x' has batch dimension 0",
        [_input_dims("zero.onnx", [0, 4])],
    ),
    Row("model-dim-negative", ["run", "{neg_onnx}"], 2, "dimension 0 is -5", [_input_dims("neg.onnx", [-5, 4])]),
    # -- inputs files ----------------------------------------------------------------------------
    Row("inputs-missing", ["run", "{model}", "--inputs", "{tmp}/none.npz"], 2, "not a readable .npz", M),
    Row(
        "inputs-not-npz",
        ["run", "{model}", "--inputs", "{bad_npz}"],
        2,
        "not a .npz file",
        [*M, _file("bad.npz", b"hello")],
    ),
    Row(
        "inputs-wrong-name",
        ["run", "{model}", "--inputs", "{k_npz}"],
        2,
        "missing ['input']",
        [*M, _npz("k.npz", x=np.ones((1, 64)))],
    ),
    Row(
        "inputs-wrong-shape",
        ["run", "{model}", "--inputs", "{s_npz}"],
        2,
        "the model takes (1, 64)",
        [*M, _npz("s.npz", input=np.ones((3, 3)))],
    ),
    Row(
        "inputs-strings",
        ["run", "{model}", "--inputs", "{t_npz}"],
        2,
        "are not numbers",
        [*M, _npz("t.npz", input=np.full((1, 64), "a"))],
    ),
    Row(
        "inputs-complex",
        ["run", "{model}", "--inputs", "{c_npz}"],
        2,
        "are not numbers",
        [*M, _npz("c.npz", input=np.ones((1, 64), complex))],
    ),
    Row(
        "inputs-objects",
        ["run", "{model}", "--inputs", "{o_npz}"],
        2,
        "values of type object are not numbers",
        [*M, _npz("o.npz", input=np.full((1, 64), "a", dtype=object))],
    ),
    Row(
        "inputs-header-huge",
        ["run", "{model}", "--inputs", "{h_npz}"],
        2,
        "its header declares 256,000,000,000,000 bytes of data in a member of 192",
        [*M, _npz_member("h.npz", _npy_header((10**12, 64)) + bytes(64))],
    ),
    Row(
        "inputs-zip-bomb",
        ["run", "{model}", "--inputs", "{b_npz}"],
        2,
        "shape (25000000,), the model takes (1, 64)",
        [*M, _npz_member("b.npz", _npy_header((25_000_000,)) + bytes(100_000_000), compress=True)],
    ),
    Row(
        "inputs-header-long",
        ["run", "{model}", "--inputs", "{l_npz}"],
        2,
        "Header info length (60000) is large",
        [*M, _npz_member("l.npz", b"\x93NUMPY\x01\x00" + (60000).to_bytes(2, "little") + b"{" + b" " * 59998 + b"\n")],
    ),
    # -- output paths (every one checked before any work) ----------------------------------------
    Row(
        "report-dir-under-file",
        ["run", "{model}", "--report-dir", "{plain}/sub"],
        2,
        "is a file, not a directory",
        [*M, _file("plain", b"x")],
    ),
    Row("report-dir-proc", ["run", "{model}", "--report-dir", "/proc/tilescope"], 2, "cannot write a report here", M),
    Row(
        "report-dir-project",
        ["run", "{model}", "--report-dir", "{site}"],
        2,
        "manifest.json is not a tilescope report manifest",
        [*M, _web_project],
    ),
    Row("save-outputs-directory", ["run", "{model}", "--save-outputs", "{tmp}"], 2, "is a directory", M),
    Row("save-outputs-proc", ["run", "{model}", "--save-outputs", "/proc/out.npz"], 2, "cannot write here", M),
    Row(
        "save-outputs-under-file",
        ["run", "{model}", "--save-outputs", "{plain}/o.npz"],
        2,
        "is a file, not a directory",
        [*M, _file("plain", b"x")],
    ),
    Row(
        "report-dir-long-name",
        ["run", "{model}", "--report-dir", "{tmp}/" + "r" * 300],
        2,
        "names are at most 255 bytes",
        M,
    ),
    Row(
        "report-dir-symlink",
        ["run", "{model}", "--report-dir", "{report_link}"],
        2,
        "a symbolic link (to",
        [*M, _report, _symlink_to_report],
    ),
    Row(
        "save-outputs-the-model",
        ["run", "{model}", "--save-outputs", "{model}"],
        2,
        "is the input",
        M,
    ),
    Row(
        "save-outputs-in-a-report",
        ["run", "{model}", "--save-outputs", "{report}/out.npz"],
        2,
        "is inside the tilescope report",
        [*M, _report],
    ),
    Row(
        "export-html-over-a-table",
        ["export", "{report}", "--html", "{report}/tile_memory.arrow"],
        2,
        "is inside the tilescope report",
        [_report],
    ),
    Row(
        "diff-html-over-the-manifest",
        ["diff", "{report}", "{report}", "--html", "{report}/manifest.json"],
        2,
        "is inside the tilescope report",
        [_report],
    ),
    Row("export-trace-fifo", ["export", "{report}", "--trace", "{fifo}"], 2, "is not a regular file", [_report, _fifo]),
    Row(
        "export-html-symlink",
        ["export", "{report}", "--html", "{link}"],
        2,
        "is a symbolic link",
        [_report, _file("target.html", b"mine"), _symlink("link", "target.html")],
    ),
    Row(
        "demo-out-file",
        ["demo", "--no-serve", "--out", "{plain}"],
        2,
        "is a file, not a directory",
        [_file("plain", b"x")],
    ),
    Row(
        "demo-out-blocked",
        ["demo", "--no-serve", "--out", "{tmp}"],
        2,
        "cnn: refusing to overwrite",
        [_user_directory("cnn")],
    ),
    Row("trace-directory", ["export", "{report}", "--trace", "{tmp}"], 2, "is a directory", [_report]),
    Row("trace-proc", ["export", "{report}", "--trace", "/proc/t.json"], 2, "cannot write here", [_report]),
    Row("html-directory", ["diff", "{report}", "{report}", "--html", "{tmp}"], 2, "is a directory", [_report]),
    Row("html-proc", ["diff", "{report}", "{report}", "--html", "/proc/d.html"], 2, "cannot write here", [_report]),
    # -- reports ---------------------------------------------------------------------------------
    Row("report-missing", ["summary", "{tmp}/none"], 2, "no such file or directory", []),
    Row("report-is-file", ["summary", "{plain}"], 2, "not a tilescope report", [_file("plain", b"x")]),
    Row("report-empty-dir", ["summary", "{tmp}"], 2, "manifest.json: missing", []),
    Row("report-foreign", ["summary", "{site}"], 2, "not a tilescope report manifest", [_web_project]),
    Row("report-parent", ["summary", "{tmp}/outer"], 2, "not a report itself, but it holds 1:", [_nested_report]),
    Row(
        "report-newer",
        ["summary", "{report}"],
        2,
        "newer than this tilescope reads",
        [_edit_manifest(lambda d: d.update(format_version=99))],
    ),
    Row(
        "report-older",
        ["summary", "{report}"],
        2,
        "version 0 is not supported",
        [_edit_manifest(lambda d: d.update(format_version=0))],
    ),
    Row("report-manifest-json", ["summary", "{report}"], 2, "manifest", [_edit_manifest(lambda d: d.pop("tables"))]),
    Row(
        "report-manifest-nested",
        ["summary", "{report}"],
        2,
        "nested too deeply to be a tilescope manifest",
        [_report, _overwrite("report", "manifest.json", b"[" * 100_000)],
    ),
    Row("report-manifest-fifo", ["summary", "{fifo_report}"], 2, "not a regular file", [_fifo_report]),
    Row(
        "report-inconsistent",
        ["summary", "{report}"],
        2,
        "1,472 rows, but the target has 2 IPUs x 16 tiles",
        [_inconsistent],
    ),
    Row("report-damaged", ["summary", "{report}", "--verify"], 2, "vertices.arrow", [_damaged]),
    # -- what-ifs (docs/whatif.md) ----------------------------------------------------------------
    Row("whatif-not-a-report", ["whatif", "{plain}"], 2, "not a tilescope report", [_file("plain", b"x")]),
    Row("whatif-no-origin", ["whatif", "{report}", "--apply", "1"], 2, "the report records no origin", [_report]),
    Row(
        "whatif-script",
        ["whatif", "{report}", "--apply", "1"],
        2,
        "what-ifs re-run ONNX models only",
        [_with_origin("script", "same")],
    ),
    Row(
        "whatif-no-proposal",
        ["whatif", "{report}", "--apply", "3"],
        2,
        "--apply 3: no such proposal (proposals: none",
        [_with_origin("model", "same")],
    ),
    Row(
        "whatif-model-gone",
        ["whatif", "{report}", "--apply", "1"],
        2,
        "the model this report was made from is gone",
        [_with_origin("model", "gone", oom=True)],
    ),
    Row(
        "whatif-model-changed",
        ["whatif", "{report}", "--apply", "1"],
        2,
        "has changed since (sha256 differs)",
        [_with_origin("model", "changed", oom=True)],
    ),
    Row(
        "whatif-out-is-the-report",
        ["whatif", "{report}", "--apply", "1", "--out", "{report}"],
        2,
        "that is the report itself; a what-if writes a new report",
        [_with_origin("model", "same", oom=True)],
    ),
    Row(
        "whatif-out-user-directory",
        ["whatif", "{report}", "--apply", "1", "--out", "{tmp}/mine"],
        2,
        "refusing to overwrite",
        [_with_origin("model", "same", oom=True), _user_directory("mine")],
    ),
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", "")


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_inventory_row(row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    env = Env(tmp_path)
    env.paths["tmp"] = str(tmp_path)
    for make in row.setup:
        make(env)
    for key, value in row.env.items():
        monkeypatch.setenv(key, value)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    argv = [a.format(**{k: v for k, v in env.paths.items() if isinstance(v, str)}) for a in row.argv]
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse's own errors
        status = int(exc.code or 0)
    finally:
        sock = env.paths.get("_socket")
        if sock is not None:
            sock.close()  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert status == row.status, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"tilescope {argv[0]}: error: ") and row.says in last, last
    for path, data in before.items():  # nothing the user had was changed or removed
        assert path.read_bytes() == data, path
    if argv[0] == "run" and row.status == 2:
        assert "running inference" not in err  # refused before any work


def test_save_outputs_into_a_missing_directory_creates_it(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    env = Env(tmp_path)
    _model(env)
    out = tmp_path / "new" / "dir" / "out.npz"
    assert main(["run", env.paths["model"], "--save-outputs", str(out)]) == 0
    with np.load(out) as data:
        assert data["output"].shape == (1, 10)


def test_a_failed_report_write_keeps_the_outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from profiler.capture import autoreport as capture
    from report_format.errors import ReportError

    env = Env(tmp_path)
    _model(env)

    def full_disk(*_: object, **__: object) -> None:
        raise ReportError(tmp_path / "rep", "cannot write the report: No space left on device")

    monkeypatch.setattr(capture, "write_report", full_disk)
    out = tmp_path / "out.npz"
    assert main(["run", env.paths["model"], "--report-dir", str(tmp_path / "rep"), "--save-outputs", str(out)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    with np.load(out) as data:  # the finished run's outputs were saved first
        assert data["output"].shape == (1, 10)


def test_dump_limit_past_any_table_prints_the_whole_table(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    report = synthetic_report(tmp_path / "r", num_ipus=1, tiles_per_ipu=4)
    assert main(["dump", str(report), "tile_memory", "--limit", "9" * 23, "--format", "json"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 4  # every tile's row (JSON lines); no OverflowError


def test_every_inventory_row_is_in_the_docs() -> None:
    doc = (ROOT / "docs" / "robustness.md").read_text()
    missing = [r.id for r in ROWS if f"`{r.id}`" not in doc]
    assert not missing, f"docs/robustness.md does not list {missing}"


def test_json_output_holds_no_infinity() -> None:
    from tilescope.commands.run import _json_safe

    doc = {
        "check": {"outputs": {"y": {"max_abs_diff": float("inf"), "max_rel_diff": float("nan")}}},
        "n": [1.5, -float("inf")],
    }
    text = json.dumps(_json_safe(doc), allow_nan=False)  # would raise on a non-finite float left in
    assert json.loads(text) == {
        "check": {"outputs": {"y": {"max_abs_diff": None, "max_rel_diff": None}}},
        "n": [1.5, None],
    }
