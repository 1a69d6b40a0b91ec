"""Lower layer: schedule -> loop IR -> passes (code generation is te.codegen, above it)."""
