"""What tilescope wrote, so that nothing else is ever deleted.

A directory is a tilescope report only if its ``manifest.json`` is tilescope's own: a JSON object
whose ``format`` is ``tilescope.report`` and whose ``format_version`` is an integer. Any other
``manifest.json`` (a web project's, say) makes the directory somebody else's.

The files tilescope owns in a report are the manifest, the table files its manifest lists (named
``<table>.arrow``) and the writer's marker. Everything else in the directory (a user's notes, a
sub-directory) is *foreign*: the writer keeps it when it replaces the report and never deletes it.

Every temporary directory the writer makes beside a report (``.<name>.tmp-*`` for the new report,
``.<name>.old-*`` for the previous one while it is swapped out) holds a marker file naming the
process, host and destination. That marker is the proof that tilescope made the directory: a stale
temporary left by a killed write is cleaned on the next write to the same destination, but only
when its marker names that destination and the process that wrote it is gone (or, unmarked, when
the pid in its name is gone and only tilescope's file names are inside), and then only the files
tilescope owns are removed, proofs last (a directory is removed only once empty, never recursively).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

from report_format import schema

MARKER = ".tilescope-writing"
_TABLE_FILE = re.compile(r"^[a-z0-9_]+" + re.escape(schema.TABLE_SUFFIX) + r"$")
_KNOWN_TABLE_FILES = frozenset(f"{n}{schema.TABLE_SUFFIX}" for n in schema.TABLE_NAMES)
#: Every name a file tilescope writes into a report or its temporaries can have.
OWN_NAMES = _KNOWN_TABLE_FILES | {schema.MANIFEST_NAME, MARKER}


def read_own_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest of ``directory`` if it is tilescope's (format name and integer version), else None."""
    manifest = directory / schema.MANIFEST_NAME
    if not manifest.is_file():  # missing, or a FIFO or device (reading one could block forever)
        return None
    try:
        doc = json.loads(manifest.read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # missing, unreadable, not UTF-8, not JSON, nested past the parser
        return None
    if not isinstance(doc, dict) or doc.get("format") != schema.FORMAT_NAME:
        return None
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return None
    return doc


def owned_files(manifest: dict[str, Any]) -> set[str]:
    """Names of the files tilescope wrote into a report with this manifest."""
    owned = {schema.MANIFEST_NAME, MARKER}
    tables = manifest.get("tables")
    if isinstance(tables, dict):
        for entry in tables.values():
            name = entry.get("file") if isinstance(entry, dict) else None
            # only names of the table-file pattern: a crafted manifest cannot claim "notes.txt"
            if isinstance(name, str) and _TABLE_FILE.match(name):
                owned.add(name)
    return owned


def foreign_entries(directory: Path, manifest: dict[str, Any] | None) -> list[str]:
    """Entries of ``directory`` tilescope did not write (all of them if it is not a report)."""
    owned = owned_files(manifest) if manifest is not None else set()
    return sorted(e.name for e in os.scandir(directory) if e.name not in owned)


def remove_owned(directory: Path, owned: set[str] | frozenset[str]) -> list[str]:
    """Remove the regular files named in ``owned`` and then the directory if it is empty.
    Returns what is left (nothing when the directory is gone). The proofs of ownership (manifest,
    marker) go last, and only when nothing else is left: if this is killed half way, or something
    not ours is in the way, what remains can still be shown to be tilescope's."""
    proofs = [n for n in (schema.MANIFEST_NAME, MARKER) if n in owned]
    for name in sorted(set(owned) - set(proofs)):
        path = directory / name
        if path.is_file() or path.is_symlink():
            path.unlink(missing_ok=True)
    rest = sorted(n for n in os.listdir(directory) if n not in proofs)
    if rest:
        return rest
    for name in proofs:
        (directory / name).unlink(missing_ok=True)
    os.rmdir(directory)
    return []


# -- markers and stale temporaries -------------------------------------------------------------
def write_marker(directory: Path, destination: Path, role: str) -> None:
    """Record in ``directory`` that this process made it for ``destination``."""
    doc = {"pid": os.getpid(), "host": socket.gethostname(), "destination": str(destination), "role": role}
    with open(directory / MARKER, "w", encoding="utf-8") as f:
        json.dump(doc, f)
        f.flush()
        os.fsync(f.fileno())


def _read_marker(directory: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((directory / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def process_gone(pid: int) -> bool:
    """True only when no process ``pid`` exists on this host."""
    return _process_gone(pid, socket.gethostname())


def _process_gone(pid: object, host: object) -> bool:
    """True only when we can tell the writing process no longer exists (same host, no such pid)."""
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def temp_prefix(destination: Path, role: str) -> str:
    """Name prefix of a temporary directory beside ``destination`` (``role`` is tmp or old); it
    carries this process's id so an empty one left by a kill can be recognised."""
    return f".{destination.name}.{role}-{os.getpid()}-"


def _pid_in_name(name: str) -> int | None:
    m = re.match(r"^\..*\.(?:tmp|old)-(\d+)-[^-]*$", name)
    return int(m.group(1)) if m else None


def clean_stale(destination: Path) -> list[str]:
    """Clean temporaries a killed write to ``destination`` left beside it. Returns one line per
    thing done or left alone (for the user); never raises for what it cannot clean."""
    messages: list[str] = []
    parent = destination.parent
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return messages
    for entry in entries:
        tmp_prefix, old_prefix = f".{destination.name}.tmp-", f".{destination.name}.old-"
        if not entry.name.startswith((tmp_prefix, old_prefix)) or not entry.is_dir(follow_symlinks=False):
            continue
        path = Path(entry.path)
        marker = _read_marker(path)
        if marker is None:
            # Killed between making the directory and finishing its marker: the name carries the
            # pid; with nothing but tilescope's own file names inside, removing them loses nothing.
            pid = _pid_in_name(entry.name)
            if pid is not None and _process_gone(pid, socket.gethostname()):
                with contextlib.suppress(OSError):
                    if set(os.listdir(path)) <= OWN_NAMES and remove_owned(path, OWN_NAMES) == []:
                        messages.append(f"removed {path.name}, left by an interrupted write")
            continue
        if marker.get("destination") != str(destination):
            continue  # not provably ours: leave it
        if not _process_gone(marker.get("pid"), marker.get("host")):
            continue  # a write still under way (or on another host)
        try:
            if entry.name.startswith(tmp_prefix):
                messages += _clean_tmp(path)
            else:
                messages += _clean_old(path, destination)
        except OSError as exc:
            messages.append(f"could not clean {path}: {exc.strerror}")
    return messages


def _clean_tmp(path: Path) -> list[str]:
    # An unfinished new report: only tilescope's own file names can be in it.
    left = remove_owned(path, OWN_NAMES)
    if left:
        return [f"left {path} from an interrupted write: it holds files tilescope did not write ({', '.join(left)})"]
    return [f"removed {path.name}, left by an interrupted write"]


def _clean_old(path: Path, destination: Path) -> list[str]:
    # The previous report, swapped out by a write killed before it finished.
    previous = path / "report"
    if previous.is_dir():
        if not destination.exists():  # killed between the two renames: put the previous report back
            os.rename(previous, destination)
            remove_owned(path, {MARKER})
            return [f"restored the previous report at {destination} (a write to it was interrupted)"]
        manifest = read_own_manifest(previous)
        # inside a directory our marker proves ours, table-file names are ours even when the
        # killed write had already removed the manifest (it is removed last, but may be gone)
        owned = owned_files(manifest) if manifest is not None else set(OWN_NAMES)
        for name in sorted(e.name for e in os.scandir(previous) if e.name not in owned):
            if not (destination / name).exists():
                os.rename(previous / name, destination / name)
        left = remove_owned(previous, owned)
        if left:
            return [f"left {previous}: it holds files tilescope did not write ({', '.join(left)})"]
    left = remove_owned(path, {MARKER})
    if left:
        return [f"left {path} from an interrupted write ({', '.join(left)})"]
    return [f"removed {path.name}, left by an interrupted write"]
