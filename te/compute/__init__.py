"""Compute layer: what an operator computes (expressions, tensors, the compute API)."""
