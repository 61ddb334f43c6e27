"""Out of memory beside other resident candidates is retried with the slot to itself (oom.py):
a verdict must not depend on who else was loaded on the GPU. On the H100 an honest real program
was judged runtime_error by a full card; here the out-of-memory is raised by the candidate (CPU
workers), once or always, and the timeline shows the retry had no other candidate beside it."""

import doctest
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator, oom

CANDS = Path(__file__).parent / "candidates"
OOM = 'raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.79 GiB (test)")'


def test_doctests():
    assert doctest.testmod(oom).failed == 0


def probe(code: str) -> str:
    return (CANDS / "py_probe.py").read_text().replace("        PROBE", "        import time, torch\n        " + code)


def oom_once(tmp_path) -> str:
    """Out of memory on its first forward only (a flag file tells the next worker)."""
    flag = str(tmp_path / "oom_once")
    return probe(f"if not os.path.exists({flag!r}):\n            open({flag!r}, 'w').close()\n            {OOM}")


def cfg(tmp_path, **kw) -> dict:
    # sandbox off: the once-only candidate leaves a flag file where the next worker sees it
    return {"device": "cpu", "cache_dir": str(tmp_path / "cache"), "timed_calls": 8, "warmup": 1, "sandbox": "off",
            "resident": 3, "timeouts_s": {"correctness": 60, "timing": 60}, **kw}


def spans(tl: list, label: str, mine: bool = True) -> list[tuple[float, float]]:
    """Phases of the evaluation ``label`` (``mine``), or of every other one."""
    return [(s["start"], s["end"]) for s in tl if s["kind"] == "phase" and (s["label"] == label) == mine]


@pytest.mark.slow
def test_out_of_memory_beside_others_is_judged_again_alone(tmp_path):
    task, once = load_file(CANDS / "tiny_task.py"), oom_once(tmp_path)
    always, other = probe(OOM), probe("raise ValueError('not memory')")
    slow = [probe(f"time.sleep(0.05)  # resident a while ({i})") for i in range(4)]
    with Evaluator(cfg(tmp_path)) as ev:
        futs = [ev.submit(task, s) for s in slow[:2]] + [ev.submit(task, once)] + \
               [ev.submit(task, s) for s in slow[2:]] + [ev.submit(task, always), ev.submit(task, other)]
        rs = [f.result() for f in futs]
        tl = list(ev.timeline)
        label = ev._label({"task_id": task.id}, once)
    r_once, r_always, r_other = rs[2], rs[5], rs[6]
    assert r_once.status == "ok" and r_once.correct, (r_once.error, r_once.log_tail)
    assert "OutOfMemoryError" in r_once.evidence["oom_retry"]["first_error"]
    assert r_always.status == "runtime_error" and "OutOfMemoryError" in r_always.error  # alone too: its own
    assert "oom_retry" in r_always.evidence
    assert r_other.status == "runtime_error" and "oom_retry" not in r_other.evidence  # not memory: no retry
    assert all(r.status == "ok" for r in rs[:2] + rs[3:5]), [(r.status, r.error) for r in rs]
    # the retry (its second "start" onwards) overlapped no phase of any other candidate
    starts = sorted(s["start"] for s in tl if s["kind"] == "phase" and s["label"] == label and s["what"] == "start")
    assert len(starts) == 2, starts
    mine = [(a, b) for a, b in spans(tl, label) if a >= starts[1]]
    others = spans(tl, label, mine=False)
    assert mine and not [(m, o) for m in mine for o in others if o[0] < m[1] and m[0] < o[1]]
    first_end = max(b for a, b in spans(tl, label) if a < starts[1])
    assert any(b > first_end for _, b in others)  # others were still resident when it failed: it waited


@pytest.mark.slow
def test_setting_off_keeps_the_first_verdict(tmp_path):
    task, once = load_file(CANDS / "tiny_task.py"), oom_once(tmp_path)
    with Evaluator(cfg(tmp_path, oom_retry_alone=False)) as ev:
        r = ev.submit(task, once).result()
    assert r.status == "runtime_error" and "oom_retry" not in r.evidence


def test_before_a_run_alone_the_orchestrator_sheds_other_tasks_device_copies(monkeypatch):
    """On a GPU the retry first drops the orchestrator's device copies of other tasks' reference
    outputs on that GPU (its own task's stay) and its allocator's cached blocks, and records the
    free memory before and after. The device calls are stood in for: this machine has no GPU."""
    import contextlib
    import types

    import torch

    free = iter([10 * 2**30, 24 * 2**30])
    emptied = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (next(free), 80 * 2**30))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: emptied.append(True))
    monkeypatch.setattr(torch.cuda, "device", lambda dev: contextlib.nullcontext())
    ev = Evaluator({"device": "cpu"})  # not entered: no workers
    ev.device = "cuda"
    for key in [(1, "cuda:0"), (2, "cuda:0"), (1, "cuda:1")]:
        ev._dev_refs[key] = {}
    got = ev._shed_device_memory(types.SimpleNamespace(index=0), {"serial": 2})
    assert list(ev._dev_refs) == [(2, "cuda:0"), (1, "cuda:1")]  # this task's copy and another GPU's stay
    assert emptied and got == {"free_gib_before": 10.0, "free_gib_shed": 24.0}
    ev.device = "cpu"
    assert ev._shed_device_memory(types.SimpleNamespace(index=0), {"serial": 2}) == {}
