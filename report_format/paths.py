"""What makes a path unusable before any file system call is tried on it.

The OS refuses a NUL byte (Python raises ValueError from every call) and a name longer than the
file system's limit (``OSError: File name too long``); both are checked here so that every command
says so in one line, naming the path, before it starts work.
"""

from __future__ import annotations

import os
from pathlib import Path

# POSIX NAME_MAX and PATH_MAX as Linux defines them (limits.h): 255 bytes a component, 4,096 a path
# (ext4, xfs, btrfs and tmpfs all use 255).
NAME_MAX = 255
PATH_MAX = 4096


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot name a file on this system, or None."""
    text = os.fspath(path)
    if "\x00" in text:
        return "the path holds a NUL byte"
    for part in Path(text).parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:
            return f"a path component is {size} bytes long ({part[:24]!r}...); names are at most {NAME_MAX} bytes"
    if len(os.fsencode(os.path.abspath(text))) >= PATH_MAX:
        return f"the path is longer than {PATH_MAX - 1} bytes"
    return None
