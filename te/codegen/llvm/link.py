"""pragma "import_llvm": LLVM IR text given by the user, linked into the kernel's module.

Takes a lowered PrimFunc (its loops' "import_llvm" pragmas, each LLVM IR text, as TVM's
tutorial makes with clang from C) and the kernel's LLVM IR text; gives one module's text
with the imported functions defined, so extern calls to them resolve. Imports llvmlite,
te.errors, te.lower.ir and te.lower.visitor.
"""
from __future__ import annotations

from llvmlite import binding as llvm

from ...errors import BuildError
from ...lower import ir as tir
from ...lower.visitor import walk_stmts

IMPORT_LLVM = "import_llvm"


def imported_llvm(body: tir.Stmt) -> list:
    """The import_llvm pragma texts of the loops in `body`, each once, in program order."""
    texts: dict = {}
    for node in walk_stmts(body):
        if isinstance(node, tir.For):
            for key, value in node.pragmas:
                if key == IMPORT_LLVM:
                    if not isinstance(value, str):
                        raise BuildError(f"te.build: pragma 'import_llvm' on loop "
                                         f"'{node.loop_var.name}' must be LLVM IR text, got "
                                         f"{type(value).__name__}")
                    texts.setdefault(value, None)
    return list(texts)


def link_imports(ll_text: str, imports: list) -> str:
    """`ll_text` with each module of `imports` linked in (their target triple and data
    layout made the kernel's)."""
    if not imports:
        return ll_text
    main = llvm.parse_assembly(ll_text)
    for k, text in enumerate(imports):
        try:
            mod = llvm.parse_assembly(text)
            mod.verify()
        except RuntimeError as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else "invalid"
            raise BuildError(f"te.build: pragma 'import_llvm' text {k} is not valid LLVM IR: "
                             f"{first}") from None
        mod.triple, mod.data_layout = main.triple, main.data_layout
        _keep_first_definitions(main, mod)
        try:
            main.link_in(mod)
        except RuntimeError as err:
            raise BuildError(f"te.build: pragma 'import_llvm' text {k} does not link into "
                             f"the kernel: {str(err).strip()}") from None
    return str(main)


def _keep_first_definitions(main: llvm.ModuleRef, mod: llvm.ModuleRef) -> None:
    """A function `main` defines already (an earlier import, as when a schedule imports
    gemv_update twice) keeps that definition: mod's copy becomes linkonce_odr, which the
    linker drops for the strong one (TVM links only what is needed, to the same end)."""
    defined = {f.name for f in main.functions if not f.is_declaration}
    for f in mod.functions:
        if not f.is_declaration and f.name in defined:
            f.linkage = "linkonce_odr"
