"""Host memory admission (rewards/harness/hostmem.py): reference contexts and resident candidates'
outputs stay under ``harness.host_memory_gb``. Without it, the real-code bench on the H200 prepared
every task's reference up front and kept them all: 17_SqueezeNetFireModule's 39 GB context got
its reference worker killed by the kernel, and later the orchestrator itself."""

import threading
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator, hostmem
from rewards.harness.config import HarnessConfig
from tests.test_harness_lock import PLAIN, RELU, cpu_cfg, relu_task, variant

CANDS = Path(__file__).parent / "candidates"


def _later(fn, *args) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    t.start()
    return t, out


def test_a_holder_waits_until_the_bytes_fit():
    m = hostmem.HostMemory(100)
    assert m.acquire("context", 60) == 60
    t, got = _later(m.acquire, "context", 60)
    time.sleep(0.2)
    assert not got and m.waiting()  # 120 > 100
    m.release("context", 60)
    t.join(5)
    assert got == [60] and m.used["context"] == 60 and not m.waiting()


def test_the_first_of_a_kind_always_enters_and_a_request_is_clamped_to_the_budget():
    m = hostmem.HostMemory(100)
    assert m.acquire("context", 500) == 100  # a context bigger than the budget runs, alone
    # a candidate never waits on the contexts (its own task's is among them): the first one enters
    assert m.acquire("candidate", 80) == 80
    t, got = _later(m.acquire, "candidate", 10)
    time.sleep(0.2)
    assert not got  # the second candidate does wait: 190 > 100
    m.release("candidate", 80)
    t.join(5)
    assert got == [10] and m.peak == 180


def test_a_waiter_that_fits_passes_a_head_that_does_not_until_the_heads_patience_runs_out():
    m = hostmem.HostMemory(100, patience_s=0.5)
    m.acquire("context", 90)
    big, got_big = _later(m.acquire, "context", 50)
    time.sleep(0.1)
    assert not got_big
    assert m.acquire("context", 5) == 5  # fits (95): passes the waiting head, whose patience lasts
    time.sleep(0.6)
    late, got_late = _later(m.acquire, "context", 5)  # would fit too (100), but the head waited too long
    time.sleep(0.2)
    assert not got_big and not got_late
    m.release("context", 95)
    big.join(5), late.join(5)
    assert got_big == [50] and got_late == [5]


def test_strict_order_with_no_patience():
    m = hostmem.HostMemory(100, patience_s=0)
    m.acquire("context", 90)
    big, got_big = _later(m.acquire, "context", 50)
    time.sleep(0.1)
    small, got_small = _later(m.acquire, "context", 5)
    time.sleep(0.2)
    assert not got_big and not got_small  # 95 would fit, but the head is first
    m.release("context", 90)
    big.join(5), small.join(5)
    assert got_big == [50] and got_small == [5]


def test_resize_charges_what_was_measured_without_waiting():
    m = hostmem.HostMemory(100)
    held = m.acquire("context", 0)  # the meta pass failed: nothing estimated
    assert m.resize("context", held, 150) == 150 and m.used["context"] == 150
    assert not m.fits(1)
    m.release("context", 150)
    assert m.fits(100) and m.used == {"context": 0, "candidate": 0}


def test_budget_setting():
    assert hostmem.budget_bytes(0) is None and hostmem.budget_bytes(None) is None
    assert hostmem.budget_bytes(2) == 2_000_000_000
    total = hostmem.total_bytes()
    assert total and hostmem.budget_bytes("auto") == int(total * 0.6)
    with pytest.raises(ValueError, match="host_memory_gb"):
        hostmem.budget_bytes(-1)
    with pytest.raises(ValueError, match="host_memory_gb"):
        HarnessConfig.from_mapping({"host_memory_gb": -3})


@pytest.mark.slow
def test_a_task_prepares_only_when_the_contexts_before_it_are_released(tmp_path):
    """With a budget smaller than one context, the second task's reference is prepared only after
    every candidate of the first is done and its context evicted; everything still finishes."""
    gelu, relu = load_file(CANDS / "tiny_task.py"), relu_task()
    with Evaluator(cpu_cfg(tmp_path, resident=2, host_memory_gb=1e-7)) as ev:  # 100 bytes
        futs = [ev.submit(gelu, variant(PLAIN, i)) for i in range(2)] + [ev.submit(relu, variant(RELU, i)) for i in range(2)]
        rs = [f.result(timeout=600) for f in futs]
        tl, keys = list(ev.timeline), [k[0] for k in ev._ctx]
        assert ev.host.used["candidate"] == 0
    assert [r.status for r in rs] == ["ok"] * 4, [(r.status, r.error) for r in rs]
    held = [s for s in tl if s["kind"] == "gpu"]
    relu_base = next(s["start"] for s in held if s["what"] == "baseline" and s["label"] == "tiny_relu")
    timed = [s for s in held if s["what"] == "time"]
    # the first task's two candidates were timed before the second task's reference was, and only then
    # the second's (unbounded, its baseline comes right after the first's, before any candidate's build)
    assert sum(s["end"] <= relu_base for s in timed) == 2 and sum(s["start"] >= relu_base for s in timed) == 2, held
    assert keys == [relu.hash]  # the first task's context was dropped for the second's
    assert all("host_wait" in r.evidence["phases_s"] for r in rs)


@pytest.mark.slow
def test_unlimited_memory_keeps_every_context(tmp_path):
    gelu, relu = load_file(CANDS / "tiny_task.py"), relu_task()
    with Evaluator(cpu_cfg(tmp_path, resident=2, host_memory_gb=0)) as ev:
        rs = [f.result(timeout=600) for f in [ev.submit(gelu, PLAIN), ev.submit(relu, RELU)]]
        keys = {k[0] for k in ev._ctx}
    assert [r.status for r in rs] == ["ok"] * 2
    assert keys == {gelu.hash, relu.hash}


@pytest.mark.slow
def test_a_meta_pass_that_ends_the_reference_process_costs_only_the_estimate(tmp_path):
    """The size estimate runs the task on the meta device in the reference worker; a task that
    exits there (here: on purpose) gets a fresh worker and is prepared and judged as before."""
    from mining.tasks import Task

    base = load_file(CANDS / "tiny_task.py")
    src = base.source.replace("def get_inputs():\n",
                              "def get_inputs():\n    if torch.empty(0).is_meta:\n        import os; os._exit(3)\n")
    task = Task(id="tiny_meta_exit", name="tiny_meta_exit", level=0, family="mlp", source=src)
    with Evaluator(cpu_cfg(tmp_path)) as ev:
        r = ev.submit(task, PLAIN).result(timeout=600)
        timings = list(ev.task_timings)
    assert r.status == "ok", (r.error, r.log_tail)
    assert timings and timings[0]["host_wait_s"] >= 0  # admitted with no estimate, measured afterwards
