"""Every error the compiler raises on purpose.

Imports nothing from the project. Each layer raises the subclass that names the step that
refused the input, with a message that names the parameter, what was expected and what came.
"""


class TEError(Exception):
    """Base of every error raised deliberately by te."""


class DTypeError(TEError, TypeError):
    """An unknown dtype, or dtypes that cannot be combined."""


class ShapeError(TEError, ValueError):
    """A shape, an index count or an extent that does not fit."""


class ComputeError(TEError, ValueError):
    """A compute definition that cannot be turned into an operator."""


class ScheduleError(TEError, ValueError):
    """An illegal schedule primitive; the autotuner records it as an invalid config."""


class LoweringError(TEError):
    """A schedule that passed validation but cannot be lowered (a compiler limitation)."""


class BuildError(TEError):
    """Code generation or native compilation failed."""


class ArgumentError(TEError, ValueError):
    """A built module was called with arguments that do not match its signature."""
