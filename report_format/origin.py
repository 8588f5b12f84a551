"""How a report was made (manifest key ``origin``): the model or script, its content hash, the options.

A what-if (``tilescope whatif``) re-runs a report's model with one option changed, so the report must
say what it ran: the file (path, size, sha256) and every option of ``tilescope run`` that changes the
result. The key is optional: reports written before it, and engines a user's own code drives
outside ``tilescope run``, have none, and still open (``origin_of`` is then None).

Inputs are not recorded: cost follows the graph, not the data, so a re-run on seeded random inputs
measures the same memory and cycles.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: What made the report: an ONNX model run by ``tilescope run`` (``profile_model``) or a workload
#: script run by ``tilescope run SCRIPT.py`` (its own engines and options).
KINDS = ("model", "script")
_CHUNK = 1 << 20  # hash in 1 MiB reads: a model of GBs is never held in memory


def file_sha256(path: str | Path) -> str:
    """The hex sha256 of a file's content, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Origin:
    """The manifest's ``origin``: what ran (``kind``, ``path`` made absolute, its ``sha256`` and
    ``bytes``), the run options (``tilescope run``'s, by ``ProfileOptions`` field name), the
    POPLAR_ENGINE_OPTIONS in force (less ``autoReport.directory``) and a script's arguments."""

    kind: str
    path: str
    sha256: str
    bytes: int
    options: dict[str, Any] = field(default_factory=dict)
    engine_options: dict[str, Any] = field(default_factory=dict)
    arguments: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "sha256": self.sha256,
            "bytes": self.bytes,
            "options": dict(self.options),
            "engine_options": dict(self.engine_options),
            "arguments": list(self.arguments),
        }

    def source_problem(self) -> str:
        """Empty when the file is still there with the recorded content; else one line saying what changed."""
        p = Path(self.path)
        if not p.is_file():
            return f"the {self.kind} this report was made from is gone: {self.path}"
        if p.stat().st_size != self.bytes or file_sha256(p) != self.sha256:
            return f"the {self.kind} this report was made from has changed since (sha256 differs): {self.path}"
        return ""


def make_origin(
    kind: str,
    path: str | Path,
    options: dict[str, Any] | None = None,
    engine_options: dict[str, Any] | None = None,
    arguments: list[str] | None = None,
) -> Origin:
    """The origin of a report made from the file ``path`` now (hashes it)."""
    if kind not in KINDS:
        raise ValueError(f"origin kind {kind!r} is not one of {KINDS}")
    p = Path(path).absolute()
    engine = {k: v for k, v in (engine_options or {}).items() if k != "autoReport.directory"}
    return Origin(kind, str(p), file_sha256(p), p.stat().st_size, dict(options or {}), engine, list(arguments or []))


def origin_of(doc: dict[str, Any] | None) -> Origin | None:
    """The ``origin`` of a manifest (its JSON object), or None for a report that has none.
    Malformed ones raise ValueError (the manifest reader turns it into a ReportError)."""
    if not doc:
        return None
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS:
        raise ValueError(f"'origin' is not an object with a kind in {KINDS}")
    options, engine, arguments = doc.get("options", {}), doc.get("engine_options", {}), doc.get("arguments", [])
    if not isinstance(options, dict) or not isinstance(engine, dict) or not isinstance(arguments, list):
        raise ValueError("'origin' options, engine_options or arguments have the wrong type")
    return Origin(
        str(doc["kind"]), str(doc["path"]), str(doc["sha256"]), int(doc["bytes"]), options, engine,
        [str(a) for a in arguments],
    )  # fmt: skip
