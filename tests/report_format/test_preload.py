"""``report_format.writer.preload``: a run with a report starts, beside it, the import pyarrow makes
when it first converts a column (pandas), once per process; a run without a report does not."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_RUN = """
import sys
from profiler import Engine, Graph, Sequence, ipu_model, ops
g = Graph(ipu_model(tiles_per_ipu=4))
x = ops.add_mapped(g, 'float', (8, 16), 'x')
p = Sequence()
ops.add(g, x, x, p)
e = Engine(g, [p], {OPTIONS})
e.load()
e.run(0)
e.run(0)
from report_format import writer
started = writer._preloading
if started is not None:
    started.join()
imported = 'pandas' in sys.modules  # before the call below, whose thread (without a report: a new one) imports it
writer.preload()  # once a process: no second thread
print(started is not None and writer._preloading is started, imported)
"""


def _run(options: str) -> str:
    code = _RUN.replace("{OPTIONS}", options)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_a_captured_run_preloads_pandas_once(tmp_path: Path) -> None:
    assert _run(repr({"autoReport.all": "true", "autoReport.directory": str(tmp_path / "r")})) == "True True"


def test_a_run_without_a_report_preloads_nothing() -> None:
    assert _run(repr({"autoReport.all": "false"})) == "False False"
