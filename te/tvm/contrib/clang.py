"""tvm.contrib.clang: C/C++ source -> LLVM IR text with clang, for pragma "import_llvm".

Takes source code (or paths of source files); gives the LLVM IR text clang emits, which
te.build links into a kernel (te/codegen/llvm/link.py). llvmlite's LLVM reads IR with
opaque pointers only, so clang 15 or later is needed (Debian 12: apt-get install
clang-19). Imports llvmlite.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile

from llvmlite import binding as llvm

# Tried in order when no cc is given: the plain name, then versioned Debian names.
CANDIDATES = ("clang",) + tuple(f"clang-{v}" for v in range(22, 14, -1))


def find_clang(required: bool = True) -> list:
    """The clang executables found on PATH (TVM's name); none found and `required`:
    RuntimeError saying how to install one."""
    found = [c for c in CANDIDATES if shutil.which(c)]
    if not found and required:
        raise RuntimeError("contrib.clang: no clang found on PATH (tried clang, clang-22 .. "
                           "clang-15); install one (Debian 12: apt-get install clang-19), or "
                           "write the LLVM IR text for pragma 'import_llvm' yourself")
    return found


def create_llvm(inputs, output: str | None = None, options=None, cc: str | None = None) -> str:
    """LLVM IR text of `inputs` (C++ source text, or paths of existing files; several are
    compiled one by one and linked into one module) compiled with clang -O2; written to
    `output` too when given."""
    cc = cc or find_clang()[0]
    if shutil.which(cc) is None:
        raise RuntimeError(f"contrib.clang: cc {cc!r} is not an executable on PATH")
    sources = [inputs] if isinstance(inputs, str) else list(inputs)
    texts = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, src in enumerate(sources):
            path = src
            if not os.path.isfile(src):
                path = os.path.join(tmp, f"input{k}.cc")
                with open(path, "w") as f:
                    f.write(src)
            out = os.path.join(tmp, f"output{k}.ll")
            cmd = [cc, "-O2", "-S", "-emit-llvm", "-o", out] + list(options or []) + [path]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"contrib.clang: {' '.join(cmd)} failed:\n{proc.stderr}")
            with open(out) as f:
                texts.append(f.read())
    text = texts[0] if len(texts) == 1 else _linked(texts)
    if output:
        with open(output, "w") as f:
            f.write(text)
    return text


def _linked(texts: list) -> str:
    main = llvm.parse_assembly(texts[0])
    for text in texts[1:]:
        main.link_in(llvm.parse_assembly(text))
    return str(main)
