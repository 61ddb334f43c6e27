"""The GPU lock of one device: first come, first served, but a waiting reference goes first.

A reference worker that waits for the lock to time its baseline holds up the next task's
preparation (one of ``harness.reference_workers``); a candidate that waits holds only its own
resident place. In a cold batch the references are the critical path, so with
``harness.reference_lock_first`` a waiting reference timing is granted the lock before waiting
candidates. Within a priority, waiters are served in arrival order (``threading.Lock`` promises
no order: a candidate could wait behind later arrivals for as long as they keep coming).
"""

from __future__ import annotations

import heapq
import itertools
import threading

REFERENCE, CANDIDATE = 0, 1  # lower is served first


class PriorityLock:
    def __init__(self):
        self._cv = threading.Condition(threading.Lock())
        self._held = False
        self._queue: list[tuple[int, int]] = []  # (priority, ticket) of the threads waiting
        self._tickets = itertools.count()

    def acquire(self, priority: int = CANDIDATE) -> None:
        with self._cv:
            me = (priority, next(self._tickets))
            heapq.heappush(self._queue, me)
            try:
                while self._held or self._queue[0] != me:
                    self._cv.wait()
            except BaseException:  # interrupted while waiting: leave the queue, wake whoever is next
                self._queue.remove(me)
                heapq.heapify(self._queue)
                self._cv.notify_all()
                raise
            heapq.heappop(self._queue)
            self._held = True

    def release(self) -> None:
        with self._cv:
            if not self._held:
                raise RuntimeError("release of an unheld GPU lock")
            self._held = False
            self._cv.notify_all()  # each waiter checks whether it is now first

    def locked(self) -> bool:
        with self._cv:
            return self._held

    def waiting(self) -> int:
        with self._cv:
            return len(self._queue)
