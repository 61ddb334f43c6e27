"""Host memory admitted to what holds big tensors in the orchestrator and its workers.

A task's reference context keeps every trial's and spot check's outputs on the host for as long
as candidates of that task are pending, and a resident candidate sends all its trial outputs at
once. Most Level 3 outputs are small, but 17_SqueezeNetFireModule returns 4.3 GB per forward:
its context is 39 GB, twice that while the reference worker sends it, and every candidate's
trials are another 43 GB. Prepared four at a time beside resident candidates and never released,
contexts ran the H200 machine (128 GiB) out of memory: the kernel killed a reference worker and
then the orchestrator itself. Admission here keeps the sum under ``harness.host_memory_gb``.

Two kinds of holder: ``context`` (a reference's outputs, held from preparation until no pending
candidate of its task is left) and ``candidate`` (a resident candidate's outputs, until judged).
The first holder of a kind always enters, so a task whose context alone exceeds the budget still
runs (alone) and a candidate never waits on the contexts its own task holds. Waiters of a kind
enter in arrival order, except that one that fits may pass a head that does not, for as long as
the head has waited less than ``patience_s``: on the H200, strict order kept every small task's
reference waiting behind SqueezeNet's for minutes (ref_wait up to 457 s), while a head that could
be passed for ever would starve.
"""

from __future__ import annotations

import collections
import os
import threading
import time

KINDS = ("context", "candidate")


def total_bytes() -> int | None:
    """The machine's physical memory (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def budget_bytes(setting, share: float = 0.6) -> int | None:
    """``harness.host_memory_gb``: auto = ``share`` of physical memory; 0 or null = unlimited."""
    if setting == "auto":
        total = total_bytes()
        return int(total * share) if total else None
    if setting in (None, 0, "0", "none", "off"):
        return None
    gb = float(setting)
    if gb <= 0:
        raise ValueError(f"harness.host_memory_gb must be positive, auto or 0 (unlimited), not {setting!r}")
    return int(gb * 1e9)


class HostMemory:
    """A byte budget shared by reference contexts and resident candidates (see the module doc)."""

    def __init__(self, budget: int | None, patience_s: float = 30.0):
        self.budget, self.patience_s = budget, patience_s
        self.used = {k: 0 for k in KINDS}
        self.peak = 0  # the most bytes admitted at once (bench/harness_throughput.py prints it)
        self._cv = threading.Condition()
        self._queues: dict[str, collections.deque] = {k: collections.deque() for k in KINDS}  # (ticket, since)

    def _fits(self, kind: str, n: int) -> bool:
        return self.budget is None or self.used[kind] == 0 or sum(self.used.values()) + n <= self.budget

    def fits(self, n: int) -> bool:
        """Whether ``n`` more bytes fit now (without the first-of-its-kind exception)."""
        with self._cv:
            return self.budget is None or sum(self.used.values()) + n <= self.budget

    def waiting(self) -> bool:
        with self._cv:
            return any(self._queues.values())

    def acquire(self, kind: str, n: int) -> int:
        """Blocks until ``n`` bytes (at most the budget) are admitted; returns the bytes held."""
        n = max(0, int(n)) if self.budget is None else min(max(0, int(n)), self.budget)
        me = (object(), time.monotonic())
        with self._cv:
            q = self._queues[kind]
            q.append(me)

            def may_enter() -> bool:
                if q[0] is me:
                    return self._fits(kind, n)
                patient = time.monotonic() - q[0][1] < self.patience_s  # the head may still be passed
                return patient and (self.budget is None or sum(self.used.values()) + n <= self.budget)

            try:  # (a head's patience running out only stops others entering: nothing to wake)
                self._cv.wait_for(may_enter)
            finally:
                q.remove(me)
                self._cv.notify_all()  # the next in line may fit now
            self._add(kind, n)
        return n

    def resize(self, kind: str, held: int, n: int) -> int:
        """What was admitted as ``held`` is now ``n`` bytes (measured after the fact); never blocks:
        growing past the budget is allowed, the next holders wait for it."""
        n = max(0, int(n))
        with self._cv:
            self._add(kind, n - held)
            self._cv.notify_all()
        return n

    def release(self, kind: str, n: int) -> None:
        with self._cv:
            self._add(kind, -n)
            self._cv.notify_all()

    def _add(self, kind: str, n: int) -> None:
        self.used[kind] = max(0, self.used[kind] + n)
        self.peak = max(self.peak, sum(self.used.values()))
