"""Runtime error types.

Takes nothing; gives ArgumentError (a kernel module was called with bad arguments; te re-exports
it) and RuntimeBuildError (native compile, link or symbol resolution failed). Imports nothing.
"""


class ArgumentError(ValueError):
    """A compiled module was called with arguments that do not match its signature."""


class RuntimeBuildError(RuntimeError):
    """Native code could not be compiled, linked or resolved."""
