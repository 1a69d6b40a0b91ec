"""Test-wide settings: passive OpenMP waiting (spinning threads distort shared machines)."""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
