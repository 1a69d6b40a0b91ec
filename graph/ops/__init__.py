"""The op table: every op the graph layer knows, name -> OpDef (pattern kind, arity,
schedule family, te compute). The only registry of the graph layer; frontends and the
builder look ops up here, nowhere else.

Imports graph.ops.{base,elementwise,nn,transform,reduce,scatter}.
"""
from .base import OpDef, Pattern, build_compute, infer, placeholders
from .elementwise import BINARY, UNARY
from .elementwise import OPS as _ELEMENTWISE
from .nn import OPS as _NN
from .reduce import OPS as _REDUCE
from .reduce import REDUCE
from .scatter import OPS as _SCATTER
from .transform import OPS as _TRANSFORM

OPS = {**_ELEMENTWISE, **_NN, **_TRANSFORM, **_REDUCE, **_SCATTER}

__all__ = ["OPS", "OpDef", "Pattern", "UNARY", "BINARY", "REDUCE", "build_compute", "infer",
           "markdown_table", "placeholders"]


def markdown_table() -> str:
    """The op table as the README shows it: op, pattern kind, inputs, what it does."""
    rows = ["| op | pattern | inputs | what it computes |", "| --- | --- | --- | --- |"]
    for name in sorted(OPS):
        op = OPS[name]
        lo, hi = op.arity
        arity = str(lo) if lo == hi else f"{lo}+" if hi > 64 else f"{lo}-{hi}"
        rows.append(f"| `{name}` | {op.pattern.name.lower()} | {arity} | {op.doc} |")
    return "\n".join(rows)
