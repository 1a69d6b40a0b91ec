"""Every error the compiler raises on purpose.

Imports only runtime.errors, whose TEError (the base) and ArgumentError (raised by built
modules when called with bad arguments, also when loaded without te) are re-exported here.
Each layer raises the subclass that names the step that refused the input, with a message
that names the parameter, what was expected and what came.
"""

from runtime.errors import ArgumentError, TEError  # noqa: F401  (re-exported)


# What te.lower, te.build and the interpreter say when a program nests deeper than one of
# their walks can follow (most keep their own stacks; see te.lower.visitor).
TOO_DEEP = ("{who}: the program nests too deep to {what} (an expression, or loops and "
            "allocations nested one per stage, deeper than Python's recursion limit); split "
            "a deep expression into stages of its own (te.compute), and compute a long chain "
            "of stages at root rather than each at its reader's loop (compute_at)")


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



class TuningLogError(TEError):
    """Appending to a tuning log failed (a full disk, say) and the run stopped; the log
    keeps whole records only. `result` is the TuneResult so far."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result


class TuningInterrupted(KeyboardInterrupt):
    """Ctrl-C during te.autotune, raised once the log holds every finished trial whole and
    the workers are gone. Still a KeyboardInterrupt, as optuna's study.optimize and
    AutoTVM's tuner.tune let it through; `result` is the TuneResult so far."""

    def __init__(self, message: str, result=None):
        super().__init__(message)
        self.result = result
