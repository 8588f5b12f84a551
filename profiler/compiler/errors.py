"""The compiler's error: one line naming the variable, compute set or tiles."""


class CompileError(ValueError):
    """The program cannot be compiled (message names the variable, compute set or tiles)."""
