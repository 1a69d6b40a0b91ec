"""Autotuning: search spaces, cost model, measurement in workers, records, dispatch.

The public entry point is `te.autotune` (api.autotune, a callable with the template API
attached). Submodules: space, auto_space (and its stage policies: micro_kernel,
row_reduction, injective, stages), dispatch, workload, records, features, cost_model,
search, measure, worker, task, result, tune, workloads. Imports te.compute, te.schedule,
te.lower, te.build and runtime; nothing below it imports this package.
"""
