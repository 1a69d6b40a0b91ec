"""Test-wide settings: passive OpenMP waiting (spinning threads distort shared machines), and
the compile cache kept out of the user's ~/.cache and off by default.

The cache is off (TE_CACHE=0) because a test of compilation must compile: with a cache
shared by the whole session, what a test checks (warnings and errors raised while building,
the fallback schedules) would depend on which tests ran before it. TE_CACHE_DIR points to a
temporary directory all the same, so a test (or a subprocess it starts) that turns the cache
on never writes under ~/.cache; tests/graph/test_graph_cache.py turns it on per test in its
own tmp_path.
"""
import atexit
import os
import shutil
import tempfile

os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ["TE_CACHE"] = "0"
os.environ["TE_CACHE_DIR"] = tempfile.mkdtemp(prefix="te_test_cache_")
atexit.register(shutil.rmtree, os.environ["TE_CACHE_DIR"], ignore_errors=True)
