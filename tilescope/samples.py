"""The sample reports `tilescope demo` makes: real workloads run on the simulated IPU.

Each sample is a workload from ``profiler.workloads`` with fixed sizes, run with
``autoReport.all`` into ``<out>/<name>``. Pairs that differ in one known way (batch size) are
there for Compare mode; one deliberately does not fit in memory, to show a graph-only report.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Sample:
    name: str
    workload: str  # module under profiler.workloads
    what: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    steps: int = 1
    target: tuple[str, dict[str, Any]] | None = None  # ("GC200", {}) or ("ipu_model", {...})


SAMPLES: tuple[Sample, ...] = (
    Sample("mlp", "mlp", "MLP training on GC200, batch 32, 5 steps", {"batch": 32, "tiles": 0}, steps=5),
    Sample(
        "mlp_batch64", "mlp", "the same MLP with batch 64 (Compare it with mlp)", {"batch": 64, "tiles": 0}, steps=5
    ),
    Sample("cnn", "cnn", "small CNN training on GC200, 3 steps", {"tiles": 0}, steps=3),
    Sample(
        "fashion_mnist",
        "fashion_mnist",
        "the PopTorch basics tutorial's FashionMNIST classifier, training on GC200, batch 16, 3 steps",
        {"tiles": 0},
        steps=3,
    ),
    Sample("transformer", "transformer", "transformer encoder layer inference on GC200", {"tiles": 0}),
    Sample("resnet", "resnet", "ResNet-style bottleneck stack inference on GC200"),
    Sample(
        "mlp_oom",
        "mlp",
        "an MLP too big for a 4-tile, 64 KiB-per-tile IPU model: graph profile only",
        {"hidden": 256},
        target=("ipu_model", {"tiles_per_ipu": 4, "bytes_per_tile": 65536}),
    ),
)


@dataclass(frozen=True)
class ModelSample:
    """A real-size sample: a built-in ONNX model (``profiler.frontends.onnx.examples``) imported
    and run once for inference, so the report shows an IPU filled the way users' are."""

    name: str
    model: str  # "resnet50" (224 px) or "bert_base" (12 layers, seq 384)
    what: str
    batch: int
    dtype: str = "float16"
    # the partials type ByteMLPerf's IPU backend compiles with (compile_backend_ipu.py: PopRT
    # partials_type "half" unless a model's interact_infos overrides it; ResNet-50's and BERT's do not)
    partials: str = "float16"
    target: str = "C600"
    image: int = 224  # ResNet-50's input size
    seq: int = 384  # BERT's sequence length
    layers: int = 12  # BERT's encoder layers
    # BERT as ByteMLPerf's C600 row ran it (bench.bytemlperf's bert row): sequences packed into rows,
    # PopRT's availableMemoryProportion, no cycle counters on the tiles, and compile-only (no values:
    # with them batch 40's compile is past this machine's host memory; cycles from the cost model)
    packed: bool = False
    available_memory_proportion: float | None = None  # None: tilescope's default
    instrument: bool = True
    compile_only: bool = False


# tilescope demo --real-size: the settings of the published C600 benchmarks (seed 000: ResNet-50
# and BERT-base inference in float16 with half partials); 12-24 s of host time each, the packed batch-40
# BERT (ByteMLPerf's BERT row) ~3 minutes and ~7.6 GiB (the whole demo's
# time and memory: tilescope.measured). ResNet-50 at the benchmark's batch 32 uses ~665 of the C600's
# 897 MiB.
REAL_SIZE_SAMPLES: tuple[ModelSample, ...] = (
    ModelSample("resnet50_b32", "resnet50", "ResNet-50 inference on C600, batch 32, float16, half partials", 32),
    ModelSample(
        "bert_base_b1", "bert_base", "BERT-base inference on C600, seq 384, batch 1, float16, half partials", 1
    ),
    # ByteMLPerf's BERT row (seed 000: 3,134 QPS on C600): PopRT's pack_config batch_size 40 and
    # available_memory_proportion 0.4 (interact_infos/bert-torch-fp32.json, as bench.bytemlperf cites)
    ModelSample(
        "bert_base_packed_b40",
        "bert_base",
        "BERT-base as ByteMLPerf ran it on C600: packed, seq 384, batch 40, float16, half partials, "
        "uninstrumented, compile-only (cycles estimated, no values)",
        40,
        packed=True,
        available_memory_proportion=0.4,
        instrument=False,
        compile_only=True,
    ),
)


#: The file, inside a model sample's report directory, holding the ONNX model it was made from, so
#: that ``tilescope whatif`` can re-run the sample (the manifest's ``origin`` names it). The report
#: writer keeps it as a foreign file when the report is rewritten (report_format.ownership).
MODEL_FILE = "model.onnx"


def model_file_problem(sample: ModelSample, out: Path) -> str:
    """Empty unless ``out/<name>/MODEL_FILE`` exists and is not the model an earlier demo wrote
    there (the report's origin names it with its content hash): then the one-line reason, for a
    user's file is never replaced."""
    from report_format.origin import origin_of
    from report_format.ownership import read_own_manifest

    path = (out / sample.name / MODEL_FILE).absolute()
    if not path.exists() and not path.is_symlink():
        return ""
    doc = read_own_manifest(out / sample.name) or {}
    try:
        o = origin_of(doc.get("origin"))
    except ValueError:
        o = None
    if o is not None and Path(o.path) == path and path.is_file() and not path.is_symlink() and not o.source_problem():
        return ""
    return "refusing to overwrite: tilescope did not write this file; move it away first"


def _make_model_sample(sample: ModelSample, out: Path) -> str:
    import hashlib
    from dataclasses import asdict, replace

    from profiler.chip.targets import get_target
    from profiler.frontends.onnx import Session, examples, import_model, load_model, random_inputs
    from profiler.frontends.onnx.profile import ProfileOptions
    from report_format.origin import Origin
    from tilescope.progress import Counter

    if sample.model == "resnet50":
        onnx_model = examples.resnet(image=sample.image)
    elif sample.packed:  # the whole model (embeddings, packed mask, SQuAD head), as bench.bytemlperf builds it
        onnx_model = examples.bert(seq=sample.seq, layers=sample.layers, packed=True)
    else:
        onnx_model = examples.bert_layer(seq=sample.seq, layers=sample.layers)
    # the report records how it was made: this model, saved beside its tables once the report is
    # written (a file written into the directory first would make it "not a tilescope report"), and
    # the `tilescope run` options that import it the same way
    data = onnx_model.SerializeToString()
    amp = sample.available_memory_proportion
    opts = ProfileOptions(target=sample.target, batch=sample.batch, dtype=sample.dtype, partials=sample.partials,
                          compile_only=sample.compile_only)  # fmt: skip
    if amp is not None:
        opts = replace(opts, available_memory_proportion=amp)
    options = {k: v for k, v in asdict(opts).items() if not (k == "wrong_kernel" and v is None)}
    model_path = (out / sample.name / MODEL_FILE).absolute()
    # an uninstrumented sample's re-run (tilescope whatif) is uninstrumented too: the option goes with its origin
    engine = {} if sample.instrument else {"debug.instrument": "false"}
    origin = Origin("model", str(model_path), hashlib.sha256(data).hexdigest(), len(data), options, engine)
    with Counter("nodes imported", prefix="     ") as nodes:
        values = not sample.compile_only
        model = import_model(load_model(onnx_model, values=values), get_target(sample.target), sample.batch,
                             sample.dtype, progress=nodes, partials=sample.partials, values=values,
                             available_memory_proportion=opts.available_memory_proportion)  # fmt: skip
    del onnx_model  # the serialized copy (data) is all that is left to write
    engine_options = {"autoReport.all": "true", "autoReport.directory": str(out)} | engine
    if sample.compile_only:
        engine_options["tilescope.compileOnly"] = "true"
    session = Session(model, engine_options, name=sample.name)
    session.engine.origin = origin
    with Counter("compute sets planned", prefix="     ") as planned:
        session.compile(progress=planned)
    if not session.engine.out_of_memory:
        session.upload_weights()
        # compile-only: no inputs, the run estimated from the cost model (as `tilescope run --compile-only`)
        session.run({} if sample.compile_only else random_inputs(model))
    session.close()
    _write_model(model_path, data)
    if session.engine.out_of_memory:
        return "out of tile memory: graph profile only"
    return captured(out / sample.name)


def _write_model(path: Path, data: bytes) -> None:
    """Write the model file atomically (a temporary beside it, then a rename): a killed demo leaves
    the earlier file or the new one, never half of one."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)  # mkstemp makes it owner-only; give it the mode a plain file would get
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def captured(path: Path) -> str:
    """The runs of the report at ``path``, counted as ``tilescope summary`` counts them (its
    ``execution`` figures, ``app.views.summary``: a model's weight upload is a run too), and the
    cycles of the run the viewer opens on (the longest that computes)."""
    from app.views.summary import summary
    from report_format.reader import open_report

    doc = summary(open_report(path))
    ex = doc["execution"]
    if not ex["captured"]:
        return "no execution profile"
    runs = f"{ex['runs']} run{'' if ex['runs'] == 1 else 's'}"
    total = [t["total"] for t in doc["truncations"] if t["kind"] == "runs"]
    if total:
        runs = f"{ex['runs']} of {total[0]} runs"
    k = ex["opening_run"]
    return f"{runs} captured; run {k}, the longest that computes: {ex['cycles_per_run'][k]:,} cycles"


def make_sample(sample: Sample | ModelSample, out: Path) -> str:
    """Run one sample with reports into ``out/<name>``; returns a one-line outcome."""
    if isinstance(sample, ModelSample):
        return _make_model_sample(sample, out)
    from profiler import OutOfMemoryError, get_target, ipu_model

    build = importlib.import_module(f"profiler.workloads.{sample.workload}").build
    kwargs = dict(sample.kwargs)
    if sample.target is not None:
        kind, params = sample.target
        kwargs["target"] = ipu_model(**params) if kind == "ipu_model" else get_target(kind, **params)
    workload = build(**kwargs)
    workload.name = sample.name  # the engine name is the report's sub-directory
    options = {"autoReport.all": "true", "autoReport.directory": str(out)}
    try:
        engine = workload.run(sample.steps, options=options)
    except OutOfMemoryError as exc:
        return f"out of memory, as intended ({str(exc).splitlines()[0][:90]}...)"
    engine.close()
    return captured(out / sample.name)


def make_samples(
    out: Path, progress: Callable[[str], None] = print, samples: tuple[Sample | ModelSample, ...] = SAMPLES
) -> list[Path]:
    """Make every sample report under ``out``; returns their directories. Every destination is
    checked first (ReportError, one line), so a bad ``out`` or a user's directory in the way of the
    last sample stops the demo before it writes anything."""
    from report_format.errors import ReportError
    from report_format.writer import check_destination

    for sample in samples:
        check_destination(out / sample.name)
        problem = model_file_problem(sample, out) if isinstance(sample, ModelSample) else ""
        if problem:
            raise ReportError(out / sample.name / MODEL_FILE, problem)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, sample in enumerate(samples, 1):
        start = time.perf_counter()
        progress(f"[{i}/{len(samples)}] {sample.name}: {sample.what} ...")
        outcome = make_sample(sample, out)
        progress(f"      {outcome} ({time.perf_counter() - start:.1f} s)")
        paths.append(out / sample.name)
    return paths
