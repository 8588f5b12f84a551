"""Output files of the commands (--save-outputs, export --trace, diff --html): checked before any
work starts, written whole or not at all (missing parent directories are created), and every
failure one line (CommandError, exit 2).

Checks try the file system rather than read permission bits: bits do not stop root and know
nothing of read-only mounts or of /proc.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tilescope.errors import CommandError


def check_output_file(path: str | Path, option: str) -> Path:
    """Raise CommandError unless a file can be written at ``path``: not a directory, and its
    nearest existing ancestor a directory where entries can be created (missing directories are
    created when writing, as for report directories). Nothing is left behind by the check."""
    out = Path(path)
    if out.is_dir():
        raise CommandError(f"{option} {out}: is a directory; give a file name")
    ancestor = out.parent if str(out.parent) else Path(".")
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise CommandError(f"{option} {out}: {ancestor} is a file, not a directory")
    try:
        probe = tempfile.mkdtemp(prefix=f".{out.name}.", dir=ancestor)
        os.rmdir(probe)
    except OSError as exc:
        raise CommandError(f"{option} {out}: cannot write here ({exc.strerror})") from None
    return out


def write_atomically(path: str | Path, option: str, write: Callable[[IO[bytes]], None], mode: int = 0o666) -> Path:
    """Write a file through ``write(binary file)`` into a temporary beside ``path``, then rename it
    into place: a failure (a full disk) leaves the previous file, never a half-written one."""
    out = check_output_file(path, option)
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=parent)
    except OSError as exc:
        raise CommandError(f"{option} {out}: cannot write here ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, mode & ~umask)  # mkstemp makes 0600; outputs are meant to be shared
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise CommandError(f"{option} {out}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return out
