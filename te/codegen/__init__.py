"""Code generation: loop IR -> LLVM IR (llvm/) or CUDA C (cuda/).

A floor above te.lower: it reads the finished loop IR that te/lower/pipeline.py gives and
runs no lowering pass itself. Below te.build, which compiles what it emits into a runtime
module.
"""
