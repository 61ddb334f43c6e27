"""The GPU lock: arrival order within a priority, a waiting reference before waiting candidates."""

import threading
import time

import pytest

from rewards.harness import gpulock


def _queue_behind_holder(lock, arrivals):
    """Hold the lock, let ``arrivals`` (name, priority) queue one after another, release; the
    order in which they were granted it."""
    order, threads = [], []
    lock.acquire(gpulock.CANDIDATE)

    def wait(name, prio):
        lock.acquire(prio)
        order.append(name)
        time.sleep(0.01)
        lock.release()
    for name, prio in arrivals:
        t = threading.Thread(target=wait, args=(name, prio))
        t.start()
        threads.append(t)
        deadline = time.time() + 5
        while lock.waiting() < len(threads) and time.time() < deadline:  # queued before the next arrives
            time.sleep(0.005)
    lock.release()
    for t in threads:
        t.join(10)
    return order


def test_waiters_of_one_priority_are_served_in_arrival_order():
    names = [(f"c{i}", gpulock.CANDIDATE) for i in range(6)]
    assert _queue_behind_holder(gpulock.PriorityLock(), names) == [n for n, _ in names]


def test_a_waiting_reference_goes_before_candidates_that_came_earlier():
    arrivals = [("c0", gpulock.CANDIDATE), ("c1", gpulock.CANDIDATE), ("ref", gpulock.REFERENCE), ("c2", gpulock.CANDIDATE)]
    assert _queue_behind_holder(gpulock.PriorityLock(), arrivals) == ["ref", "c0", "c1", "c2"]


def test_the_lock_is_exclusive_and_an_unheld_release_is_an_error():
    lock, inside, most = gpulock.PriorityLock(), [0], [0]

    def work(prio):
        for _ in range(50):
            lock.acquire(prio)
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            inside[0] -= 1
            lock.release()
    ts = [threading.Thread(target=work, args=(i % 2,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert most[0] == 1 and not lock.locked() and lock.waiting() == 0
    with pytest.raises(RuntimeError):
        lock.release()
