"""Lowering passes: each module holds one pure function IR -> IR; device_split (with
device_sync) is target 'cuda''s host/device split, which reads the IR and gives the
kernels' plan."""
