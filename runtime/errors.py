"""Runtime error types.

Takes nothing; gives TEError (the base of every error te, graph and runtime raise on purpose),
ArgumentError (a kernel module was called with bad arguments) and RuntimeBuildError (native
compile, link or symbol resolution failed); te re-exports all three. Imports nothing.
"""


class TEError(Exception):
    """Base of every error raised deliberately by te, graph and runtime (defined here, the
    bottom layer, so that a module loaded without te raises TEErrors too)."""


class ArgumentError(TEError, ValueError):
    """A compiled module was called with arguments that do not match its signature."""


class RuntimeBuildError(TEError, RuntimeError):
    """Native code could not be compiled, linked or resolved."""
