"""Which threads a candidate's process started, and whether candidate code runs on them.

torch.compile (inductor's compile pool, its subprocess reader) starts threads of its own on the
first compiled call; counting those as a background-thread hack paid 0 to programs that only use
torch.compile (seen on the H200 on METR's solutions). A thread counts as the candidate's when a
frame of its stack is in the candidate's file, or when its target was not defined by torch or the
standard library (an extension function, say). A candidate's own ThreadPoolExecutor is therefore
attributed to the library; the static check (`threading.`, `concurrent.futures.` in the source)
covers it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import threading

_LIBRARY_DIRS = tuple(os.path.realpath(p) for p in {sysconfig.get_paths()["stdlib"],
                                                     sysconfig.get_paths()["platstdlib"]})


def ids() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def _library(fn) -> bool:
    mod = getattr(fn, "__module__", None) or ""
    code = getattr(fn, "__code__", None)
    if code is None:  # a builtin: stdlib (print) or an extension function (candidate)
        return mod in sys.builtin_module_names or mod.split(".")[0] in ("torch", "_thread")
    path = os.path.realpath(code.co_filename)
    return mod.split(".")[0] == "torch" or path.startswith(_LIBRARY_DIRS)


def started(before: set[int], candidate_file: str) -> dict:
    """``{threads_started, threads_candidate, thread_names}`` for threads alive now and not in
    ``before``."""
    frames = sys._current_frames()
    new = [t for t in threading.enumerate() if t.ident not in before]
    mine = 0
    for t in new:
        f, files = frames.get(t.ident), set()
        while f is not None:
            files.add(f.f_code.co_filename)
            f = f.f_back
        target = getattr(t, "_target", None)
        mine += candidate_file in files or (target is not None and not _library(target))
    return {"threads_started": len(new), "threads_candidate": mine,
            "thread_names": sorted(t.name for t in new)[:8]}
