"""What the current basic block already computed, for codegen_llvm's FuncGen (a mixin).

Gives value numbering (pure values reused while the builder stays in the block that made
them), memory contents (the value last loaded or stored at an address, until a store to
that buffer or a call) and per-function constants. Imports llvmlite only.
"""
from __future__ import annotations

from llvmlite import ir


class BlockValues:
    """Mixin; call init_block_values() before use."""

    b: ir.IRBuilder

    def init_block_values(self) -> None:
        self._vn_block = None
        self._vn: dict = {}  # key -> pure value computed in _vn_block
        self._memory: dict = {}  # (buffer data Var, address, type) -> value in _vn_block
        self._consts: dict = {}

    def reuse(self, key) -> ir.Value | None:
        """The pure value `key` names if it was computed in the current block, else None."""
        if self.b.block is not self._vn_block:
            self._vn_block, self._vn, self._memory = self.b.block, {}, {}
            return None
        return self._vn.get(key)

    def keep(self, key, value: ir.Value) -> ir.Value:
        if self.b.block is self._vn_block:
            self._vn[key] = value
        return value

    def load(self, data, ptr, typ: ir.Type, align: int) -> ir.Value:
        """The value at `ptr` (in buffer `data`) as `typ`: the one last loaded from or stored
        to that address in this block when no store to `data` (or call that may write
        memory) came in between, else a new load."""
        key = (data, ptr, typ)
        if self.b.block is self._vn_block and key in self._memory:
            return self._memory[key]
        value = self.b.load(ptr, typ=typ, align=align)
        if self.b.block is self._vn_block:
            self._memory[key] = value
        return value

    def store(self, data, value: ir.Value, ptr, align: int) -> None:
        self.b.store(value, ptr, align=align)
        self.forget_memory(data)
        if self.b.block is self._vn_block:
            self._memory[(data, ptr, value.type)] = value

    def forget_memory(self, data=None) -> None:
        """After a store to buffer `data` (distinct buffers never overlap: parameters are
        noalias, allocations disjoint), or to anything (data=None: a call, a parallel
        launch, a nested statement)."""
        if data is None:
            self._memory = {}
        elif self._memory:
            self._memory = {k: v for k, v in self._memory.items() if k[0] is not data}

    def const(self, typ: ir.Type, value) -> ir.Constant:
        """One shared ir.Constant per (type, value), so value numbering sees equal constants
        as the same operand (float keys by hex: 0.0 and -0.0 differ, NaN matches itself)."""
        return self.shared((typ, value.hex() if isinstance(value, float) else value),
                           lambda: ir.Constant(typ, value))

    def shared(self, key, make) -> ir.Constant:
        """A constant built once per function (llvmlite caches each constant's text)."""
        c = self._consts.get(key)
        if c is None:
            c = self._consts[key] = make()
        return c
