"""Errors every verb may raise; ``tilescope.cli`` turns them into one line and exit code 2."""


class CommandError(Exception):
    """Bad command-line input; the message is one line. Exit code 2."""
