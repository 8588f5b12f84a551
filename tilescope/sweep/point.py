"""One point of a sweep, computed in a Dask worker, and the record that lets a rerun reuse it.

``run_point(spec)`` captures the point into ``reports/<name>`` of the sweep directory through
``tilescope run``'s own code (its option parser, engine options and ``profile_model``), reads the
figures back from the report with the summary views (``sweep_figures``: the numbers
``tilescope summary`` prints), and last writes ``points/<name>.json`` (temporary file + rename): the
point's options, the model's sha256, the report's path and its manifest's ``created``. The record is
written only once the report is whole, so a point killed part way has no record and is computed again;
``reusable`` accepts a record only when its report opens and is the one the record names.

A point that cannot be computed (does not fit, an unsupported operator, a bad value for this model)
returns a row saying why; only a lost worker or a bug escapes as an exception (Dask retries it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from report_format.ownership import read_own_manifest

#: The ``format`` of a point record; anything else in ``points/`` is not ours and is left alone.
RECORD_FORMAT = "tilescope.sweep.point"
RECORD_VERSION = 1
POINTS_DIR = "points"
REPORTS_DIR = "reports"


def model_digest(path: str | Path) -> str:
    """sha256 of the model (or script) file: a rerun on a changed model reuses nothing."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def empty_row(spec: dict[str, Any]) -> dict[str, Any]:
    """A row with the point's options and no figures (NaN / -1, as the sweep table's convention)."""
    o = spec["options"]
    amp = o.get("available_memory_proportion")
    return {
        "point": spec["index"], "name": spec["name"], "args": " ".join(spec["argv"]),
        "target": o.get("target", ""), "batch": -1 if o.get("batch") is None else int(o["batch"]),
        "dtype": o.get("dtype", ""), "partials": o.get("partials", ""),
        "available_memory_proportion": math.nan if amp is None else float(amp),
        "ipus": int(o.get("ipus", 1)), "replicas": int(o.get("replicas", 1)), "pipeline": bool(o.get("pipeline")),
        "status": "failed", "fits": False, "reason": "", "report": "", "report_created": "",
        "samples_per_second": math.nan, "cycles": -1, "max_tile_bytes": -1, "total_bytes": -1,
        "tile_balance": math.nan, "host_seconds": math.nan, "worker": "",
    }  # fmt: skip


def sweep_figures(report_path: Path, samples_per_run: int | None) -> dict[str, Any]:
    """The row's figures from a report, by the summary view (``app.views.summary.summary``): the
    opening run's cycles and tile balance, peak and total tile memory; samples/s is the run's samples
    over the opening run's simulated seconds (NaN when the samples are not known: a script)."""
    from app.views.summary import summary
    from report_format.reader import open_report

    report = open_report(report_path)
    doc = summary(report)
    head = doc["execution"]["headline"]
    mem = doc["memory"]
    fits = mem["out_of_memory_tiles"] == 0 and head is not None
    seconds = head["seconds"] if head else 0.0
    return {
        "fits": fits,
        "report_created": report.manifest.created,
        "cycles": int(head["cycles"]) if head else -1,
        "tile_balance": math.nan if not head or head["tile_balance"] is None else float(head["tile_balance"]),
        "samples_per_second": samples_per_run / seconds if samples_per_run and seconds > 0 else math.nan,
        "max_tile_bytes": int(mem["max_tile_bytes"]),
        "total_bytes": int(mem["total_bytes_including_gaps"]),
    }


def run_point(spec: dict[str, Any]) -> dict[str, Any]:
    """Compute one point (in a worker process); returns its sweep row. ``spec``: ``sweep`` (absolute
    directory), ``model``, ``model_sha256``, ``index``, ``name``, ``argv``, ``options``, ``script``,
    and the test hooks ``kill_marker`` / ``delay_s``."""
    start = time.perf_counter()
    _test_hooks(spec)
    sweep = Path(spec["sweep"])
    report_dir = sweep / REPORTS_DIR / spec["name"]
    row = empty_row(spec)
    row["worker"] = f"{socket.gethostname()}:{os.getpid()}"
    saved = os.environ.get("POPLAR_ENGINE_OPTIONS")
    try:
        computed = _script(spec, report_dir) if spec["script"] else _model(spec, report_dir)
    finally:  # a worker computes many points: leave its environment as it found it
        if saved is None:
            os.environ.pop("POPLAR_ENGINE_OPTIONS", None)
        else:
            os.environ["POPLAR_ENGINE_OPTIONS"] = saved
    row.update(computed)
    row["host_seconds"] = time.perf_counter() - start
    write_record(sweep, spec, row)
    return row


def _model(spec: dict[str, Any], report_dir: Path) -> dict[str, Any]:
    from profiler.frontends.onnx.profile import ProfileError, profile_model
    from report_format.errors import ReportError
    from tilescope.commands import run
    from tilescope.errors import CommandError

    try:
        args = run.parse_options(spec["argv"])
        run._engine_options(str(report_dir))  # run's --report-dir, checked as run checks it
        result = profile_model(Path(spec["model"]), run.profile_options(args), lambda s: run._load_inputs(s, None))
    except (ProfileError, CommandError, ReportError) as exc:
        return {"status": "failed", "reason": _one_line(exc)}
    out: dict[str, Any] = {"status": "out_of_memory" if result.out_of_memory else "ok", "reason": result.out_of_memory}
    if result.report_path is not None:
        out |= sweep_figures(Path(result.report_path), result.samples_per_run)
        out["report"] = str(Path(result.report_path).relative_to(Path(spec["sweep"])))
    return out


def _script(spec: dict[str, Any], report_dir: Path) -> dict[str, Any]:
    """A workload script, run as ``tilescope run SCRIPT`` runs it, the point's options given to the
    script as its own arguments; the first report it writes is the point's."""
    import contextlib as _c
    import io

    from profiler.engine import engine
    from report_format.errors import ReportError
    from tilescope.commands import run
    from tilescope.errors import CommandError

    engine.REPORTS_WRITTEN.clear()  # a worker runs many points: only this script's reports
    try:
        run._engine_options(str(report_dir), script=True)
        with _c.redirect_stdout(io.StringIO()):
            code = run._run_script(Path(spec["model"]), list(spec["argv"]))
    except (CommandError, ReportError) as exc:
        return {"status": "failed", "reason": _one_line(exc)}
    except Exception as exc:  # the user's script raised: that point failed, the sweep goes on
        return {"status": "failed", "reason": f"the script raised {type(exc).__name__}: {_one_line(exc)}"}
    if code != 0:
        return {"status": "failed", "reason": f"the script exited with status {code}"}
    if not engine.REPORTS_WRITTEN:
        return {"status": "failed", "reason": "the script wrote no report"}
    report = Path(engine.REPORTS_WRITTEN[0])
    out = sweep_figures(report, None)
    out |= {"status": "ok" if out["fits"] else "out_of_memory", "report": str(report.relative_to(spec["sweep"]))}
    out["reason"] = "" if out["fits"] else "out of memory (the report shows the memory)"
    return out


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _test_hooks(spec: dict[str, Any]) -> None:
    """Tests only: sleep ``delay_s`` (a sweep slow enough to interrupt), and kill this worker process
    the first time any point gets here (the marker file, created exclusively, says it happened)."""
    if spec.get("delay_s"):
        time.sleep(float(spec["delay_s"]))
    marker = spec.get("kill_marker")
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        import signal

        os.kill(os.getpid(), signal.SIGKILL)


def write_record(sweep: Path, spec: dict[str, Any], row: dict[str, Any]) -> Path:
    """``points/<name>.json``, whole or not at all; a file there that is not a point record is kept."""
    folder = sweep / POINTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{spec['name']}.json"
    if out.exists() and read_record(out) is None:
        raise OSError(f"{out}: exists and is not a tilescope point record; not replaced")
    doc = {
        "format": RECORD_FORMAT, "format_version": RECORD_VERSION, "model": spec["model"],
        "model_sha256": spec["model_sha256"], "argv": spec["argv"], "options": spec["options"],
        "row": {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()},
    }  # fmt: skip
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return out


def read_record(path: Path) -> dict[str, Any] | None:
    """A point record if ``path`` is one tilescope wrote, else None."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(doc, dict) and doc.get("format") == RECORD_FORMAT and doc.get("format_version") == RECORD_VERSION
    return doc if ok and isinstance(doc.get("row"), dict) and isinstance(doc.get("options"), dict) else None


def reusable(sweep: Path, record: dict[str, Any]) -> dict[str, Any] | None:
    """The record's row if its point need not be computed again: it did not fail, and its report (if
    it made one) is a whole tilescope report whose manifest was written when the record says. Else None."""
    row = dict(record["row"])
    if row.get("status") == "failed":  # a rerun retries a failed point (failing fast again if it must)
        return None
    for k, v in row.items():
        if v is None:  # NaN was stored as null (JSON has no NaN)
            row[k] = math.nan
    if row.get("report"):
        path = sweep / row["report"]
        manifest = read_own_manifest(path)
        if manifest is None or manifest.get("created") != row.get("report_created"):
            return None
        from report_format.errors import ReportError
        from report_format.reader import open_report

        try:
            open_report(path)  # manifest, version, every table file's size and schema
        except ReportError:
            return None
    return row


def finished(sweep: Path, model_sha256: str) -> dict[str, dict[str, Any]]:
    """Reusable rows of ``sweep``'s point records for this model, by the point's options (canonical JSON)."""
    out: dict[str, dict[str, Any]] = {}
    folder = sweep / POINTS_DIR
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        record = read_record(path)
        if record is None or record.get("model_sha256") != model_sha256:
            continue
        row = reusable(sweep, record)
        if row is not None:
            out[json.dumps(record["options"], sort_keys=True)] = row
    return out
