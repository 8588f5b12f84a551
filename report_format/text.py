"""Text from users and their files made safe for a one-line message: every layer prints names it
did not choose (model node names, paths, engine names), and a terminal must not act on them."""

from __future__ import annotations


def printable(text: object, limit: int = 120) -> str:
    """``text`` safe for a one-line message: decoded (protobuf hands invalid UTF-8 back as bytes),
    control characters (ANSI escapes, newlines) escaped, and cut to ``limit`` characters."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[: limit - 3] + "..."
