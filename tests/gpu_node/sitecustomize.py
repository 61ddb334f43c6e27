"""Makes this interpreter look like the GPU machine: duckdb and polars cannot be imported.

Put this folder first on PYTHONPATH (tests/test_gpu_node_imports.py, and the CPU dry run of
scripts/gpu_check_pipeline.sh); harness workers inherit PYTHONPATH, so they are blocked too.
"""

import importlib.abc
import sys

ABSENT = {"duckdb", "polars"}


class _Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {name!r} (absent on the GPU machine)", name=name)
        return None


sys.meta_path.insert(0, _Absent())
