"""Loop IR and its host/device split (te/lower/passes/device_split.py) -> CUDA C."""
