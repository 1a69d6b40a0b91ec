"""Loop IR -> LLVM IR text for the CPU (codegen.py; its helpers bounds, exp, intrinsics,
parallel, reuse, on the base types.py)."""
