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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from report_format.ownership import read_own_manifest
from report_format.paths import path_problem
from tilescope.errors import CommandError

#: --force's help, one text for every command that writes an output file
FORCE_HELP = "an output path that is a symbolic link: write the file it points to (the link is kept); refused without"


def check_output_file(
    path: str | Path, option: str, inputs: Sequence[str | Path] = (), follow_symlinks: bool = False
) -> Path:
    """Raise CommandError unless a file can be written at ``path`` without destroying anything the
    user did not ask to replace: a usable path (no NUL byte, names within the file system's limit),
    not a directory, a device, a FIFO or a symbolic link (replacing the link would turn it into a
    regular file), not inside a tilescope report (a report's files are its own) and not one of the
    command's ``inputs`` (the model being run); and its nearest existing ancestor a directory where
    entries can be created (missing directories are created when writing, as for report
    directories). An existing regular file is replaced, as asked. With ``follow_symlinks`` (--force)
    a symbolic link is followed: the file it points to is checked as above and is what is returned
    (and replaced), the link kept. Nothing is left behind by the check."""
    problem = path_problem(path)
    if problem:
        raise CommandError(f"{option} {os.fspath(path)!r}: {problem}")
    out = Path(path)
    if out.is_symlink() and not follow_symlinks:
        raise CommandError(
            f"{option} {out}: is a symbolic link; give the path of the file it points to, or --force to write through it"
        )
    if out.is_symlink():
        out = Path(os.path.realpath(out))
    if out.is_dir():
        raise CommandError(f"{option} {out}: is a directory; give a file name")
    if out.exists() and not out.is_file():
        raise CommandError(f"{option} {out}: is not a regular file (a device, FIFO or socket); give a file name")
    for given in inputs:
        with contextlib.suppress(OSError):
            if out.exists() and os.path.samefile(out, given):
                raise CommandError(f"{option} {out}: is the input {given}; give another file name")
    holder = out.absolute().parent
    if read_own_manifest(holder) is not None:
        raise CommandError(f"{option} {out}: is inside the tilescope report {holder}; write it elsewhere")
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


def write_atomically(
    path: str | Path,
    option: str,
    write: Callable[[IO[bytes]], None],
    mode: int = 0o666,
    inputs: Sequence[str | Path] = (),
    follow_symlinks: bool = False,
) -> Path:
    """Write a file through ``write(binary file)`` into a temporary beside ``path``, then rename it
    into place: a failure (a full disk) leaves the previous file, never a half-written one. The
    destination is checked again (``check_output_file``) just before; through a symbolic link with
    ``follow_symlinks``, the file it points to is replaced and the link kept."""
    out = check_output_file(path, option, inputs, follow_symlinks)
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
