"""A candidate needs only its reference's outputs: it is loaded, tried and timed while the
reference's baseline is still to come, and its speedup is filled in when the baseline is there
(CPU, a pure-Python candidate; the reference's timing is held back by the test)."""

import threading
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator
from rewards.harness import evaluator as evmod

CANDS = Path(__file__).parent / "candidates"
LEGIT = (CANDS / "py_probe.py").read_text().replace("        PROBE", "        pass")
pytestmark = pytest.mark.slow


def _held_baseline(monkeypatch, fail: bool = False) -> threading.Event:
    gate, real = threading.Event(), evmod.Evaluator._time_baseline

    def held(self, *a, **k):
        assert gate.wait(120)
        if fail:
            raise evmod.WorkerRaised("RuntimeError: the reference's timing failed")
        return real(self, *a, **k)
    monkeypatch.setattr(evmod.Evaluator, "_time_baseline", held)
    return gate


def _cfg(tmp_path, **kw) -> dict:
    return {"device": "cpu", "cache_dir": str(tmp_path), "timed_calls": 10, "warmup": 1,
            "timeouts_s": {"correctness": 30, "timing": 30}, **kw}


def _until(cond, limit: float = 120.0) -> bool:
    end = time.time() + limit
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def _timed(ev) -> bool:
    return any(x["kind"] == "gpu" and x["what"] == "time" for x in list(ev.timeline))


def test_the_candidate_is_timed_before_the_baseline_and_gets_its_speedup_after(tmp_path, monkeypatch):
    gate, joined, join = _held_baseline(monkeypatch), threading.Event(), evmod.Evaluator._join_baseline

    def joining(self, *a, **k):  # the candidate is done with its worker and slot: only the join is left
        joined.set()
        return join(self, *a, **k)
    monkeypatch.setattr(evmod.Evaluator, "_join_baseline", joining)
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path)) as ev:
        fut = ev.submit(task, LEGIT)
        assert joined.wait(120) and _timed(ev), "the candidate was not timed while the baseline was held"
        time.sleep(0.5)
        assert not fut.done()  # its result waits for the reference's runtime
        gate.set()
        r = fut.result(120)
    assert r.status == "ok" and r.correct, (r.error, r.log_tail)
    assert r.ref_runtime_us > 0 and r.speedup == pytest.approx(r.ref_runtime_us / r.runtime_us)
    assert r.evidence["phases_s"]["baseline_wait"] >= 0.5


def test_waiting_for_the_baseline_first_is_a_setting(tmp_path, monkeypatch):
    gate = _held_baseline(monkeypatch)
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path, candidates_wait_for_baseline=True)) as ev:
        fut = ev.submit(task, LEGIT)
        time.sleep(8)  # a build-free candidate is loaded and timed in ~2-3 s once it may start
        assert not [x for x in list(ev.timeline) if x["kind"] == "phase"] and not fut.done()
        gate.set()
        r = fut.result(120)
    assert r.status == "ok" and r.speedup == pytest.approx(r.ref_runtime_us / r.runtime_us)


def test_a_baseline_that_fails_after_the_candidate_ran_makes_it_invalid(tmp_path, monkeypatch):
    gate = _held_baseline(monkeypatch, fail=True)
    task = load_file(CANDS / "tiny_task.py")
    with Evaluator(_cfg(tmp_path)) as ev:
        fut = ev.submit(task, LEGIT)
        assert _until(lambda: _timed(ev))
        gate.set()
        r = fut.result(120)
    assert (r.status, r.correct, r.speedup) == ("invalid", False, None)
    assert r.error.startswith("reference failed:") and "timing failed" in r.error


def test_a_profile_left_to_run_frees_the_reference_worker_for_the_next_task(tmp_path, monkeypatch):
    """``_time_baseline`` may leave the reference's profile to a thread of its own (GPU runs,
    ``reference_profilers``): the one reference worker then prepares the next task at once, and
    the first task's candidate gets its speedup when that profile is done."""
    gate, real = threading.Event(), evmod.Evaluator._time_baseline

    def rest_later(self, rw, task, *a, **k):
        base, rest = real(self, rw, task, *a, **k)
        assert rest is None  # CPU: nothing is profiled; the test stands in for the GPU's profile
        if "BATCH = 8" not in task.source:
            return base, None
        return None, lambda: gate.wait(120) and base
    monkeypatch.setattr(evmod.Evaluator, "_time_baseline", rest_later)
    first = load_file(CANDS / "tiny_task.py")
    (tmp_path / "other_task.py").write_text(first.source.replace("BATCH = 8", "BATCH = 4"))
    second = load_file(tmp_path / "other_task.py")
    with Evaluator(_cfg(tmp_path / "cache", reference_workers=1)) as ev:
        f1 = ev.submit(first, LEGIT)
        assert _until(lambda: _timed(ev))
        f2 = ev.submit(second, LEGIT)
        r2 = f2.result(120)  # prepared and baselined by the one worker while the first's profile waits
        assert r2.status == "ok" and r2.speedup is not None and not f1.done()
        gate.set()
        r1 = f1.result(120)
    assert r1.status == "ok" and r1.speedup == pytest.approx(r1.ref_runtime_us / r1.runtime_us)
    assert [t["task"] for t in ev.task_timings] == [second.id, first.id]


def test_references_are_prepared_first_for_tasks_whose_candidates_wait():
    """The next free reference worker takes the context a built candidate waits for (the
    earliest such), else the earliest submitted; the choice is made when the worker is free."""
    import concurrent.futures as cf
    import queue

    ev = Evaluator({"device": "cpu"})  # not entered: the queue and the choice alone
    ev._refs, started = queue.Queue(), []
    ev._task_context = lambda rw, k, e, task, ov, t: started.append(task)
    ctxs = {name: evmod._Ctx(cf.Future()) for name in "abcd"}
    for i, (name, e) in enumerate(ctxs.items()):
        ev._ref_queue.append((e, name, name, {}, float(i)))
    ev._want(ctxs["c"].future)
    ev._want(ctxs["b"].future)
    ev._want(ctxs["c"].future)  # a second candidate of c: still wanted since the first
    for _ in ctxs:
        ev._refs.put("worker")
        ev._next_context()
    assert started == ["c", "b", "a", "d"] and not ev._ref_queue
