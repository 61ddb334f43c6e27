"""Thread attribution (rewards/harness/threads.py) and the background_thread verdict it feeds.

A thread pool started by a library (torch.compile's compile pool is one) runs no candidate code
and is noted, not paid 0; a thread running the candidate's own code is a major finding.
"""

import concurrent.futures as cf
import threading
import types

from rewards.dynamic import from_evidence
from rewards.harness import threads

CAND = '''
import threading, time
stop = threading.Event()
def busy():
    while not stop.is_set():
        time.sleep(0.01)
def start():
    t = threading.Thread(target=busy, daemon=True)
    t.start()
    return t
'''


def _candidate_module(tmp_path):
    path = str(tmp_path / "candidate.py")
    mod = types.ModuleType("candidate")
    exec(compile(CAND, path, "exec"), mod.__dict__)
    return mod, path


def test_a_thread_running_candidate_code_is_the_candidates(tmp_path):
    mod, path = _candidate_module(tmp_path)
    before = threads.ids()
    t = mod.start()
    try:
        got = threads.started(before, path)
    finally:
        mod.stop.set()
        t.join()
    assert got["threads_started"] == 1 and got["threads_candidate"] == 1


def test_a_library_pool_is_counted_but_not_the_candidates(tmp_path):
    _, path = _candidate_module(tmp_path)
    before = threads.ids()
    with cf.ThreadPoolExecutor(2, thread_name_prefix="lib-pool") as pool:
        list(pool.map(abs, range(8)))
        got = threads.started(before, path)
    assert got["threads_started"] >= 1 and got["threads_candidate"] == 0
    assert all(n.startswith("lib-pool") for n in got["thread_names"])


def test_an_extension_function_as_target_is_the_candidates(tmp_path):
    # a function from outside torch and the standard library stands in for an extension's
    ev = threading.Event()
    def wait():
        ev.wait(5)

    wait.__module__ = "my_ext"
    wait.__code__ = wait.__code__.replace(co_filename=str(tmp_path / "my_ext.so"))
    before = threads.ids()
    t = threading.Thread(target=wait, daemon=True)
    t.start()
    try:
        got = threads.started(before, str(tmp_path / "candidate.py"))
    finally:
        ev.set()
        t.join()
    assert got["threads_candidate"] == 1


def test_verdict_library_threads_minor_candidate_threads_major():
    lib = from_evidence({"threads_started": 3, "threads_candidate": 0,
                         "thread_names": ["InductorSubproc"]})
    mine = from_evidence({"threads_started": 1, "threads_candidate": 1})
    old = from_evidence({"threads_started": 2})  # recorded before attribution existed
    assert [(f.category, f.severity) for f in lib] == [("background_thread", "minor")]
    assert [(f.category, f.severity) for f in mine] == [("background_thread", "major")]
    assert [(f.category, f.severity) for f in old] == [("background_thread", "major")]
