"""Warm workers for candidates that call ``torch.compile`` (``harness.compiler_spares``).

``torch.compile(..., backend="inductor")`` imports dynamo and inductor's ``compile_fx`` (~1400
modules) the first time a process calls it: 7.7 CPU-s of such a candidate's ``load`` on the H100
host. A resident candidate is stopped (SIGSTOP) whenever another is timed, so that import took
16-27 s of its resident place and the four such candidates of the 24-task bench were its last
four to finish (session 20). Here, when such a candidate's build starts, a candidate worker is
started on a slot that imports them after its hello (worker.py, ``KM_IMPORT_COMPILER``): an
idle spare that has said hello is never stopped (it has run no candidate code), so the import
runs beside the build and beside other candidates' timing, and the candidate takes that worker
when it loads. Whether a program calls it is read from its text (buildorder.calls_torch_compile);
a worker of this kind that nobody takes is dropped, one per candidate that no longer wants it.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from rewards.harness import buildorder

POOL = "compiler"  # the slots' spare pool of these workers


def calls_torch_compile(source: str) -> bool:
    tree = buildorder.parse(source)
    return tree is not None and buildorder.calls_torch_compile(tree)


class CompilerSpares:
    """Keeps, per slot, as many compiler spares as candidates that want one and have not loaded
    (split over the slots, at most ``per_slot`` each: the resident places)."""

    def __init__(self, slots: list, per_slot: int, enabled: bool):
        self.slots, self.per_slot, self.enabled = slots, per_slot, enabled
        self._wanting: set[int] = set()  # id() of the results of candidates that will take one
        self._mu = threading.Lock()
        self._keeping = threading.Lock()  # one _keep at a time: two at once would both start the missing one

    def want(self, key: Any, source: str) -> bool:
        """At the candidate's build start: True (and a spare starting) when its program calls
        torch.compile."""
        if not (self.enabled and calls_torch_compile(source)):
            return False
        with self._mu:
            self._wanting.add(id(key))
        self._keep()
        return True

    def wants(self, key: Any) -> bool:
        with self._mu:
            return id(key) in self._wanting

    def take(self, slot: Any, key: Any) -> Any | None:
        """At its load: a warm compiler spare of ``slot`` for a candidate that wanted one (None
        otherwise, or when none is there)."""
        w = slot.take_spare(POOL) if self.wants(key) else None
        self.release(key)
        return w

    def release(self, key: Any) -> None:
        """The candidate loaded or finished: one spare fewer wanted."""
        with self._mu:
            if id(key) not in self._wanting:
                return
            self._wanting.discard(id(key))
        self._keep()

    def _keep(self) -> None:
        with self._keeping:
            with self._mu:
                n = len(self._wanting)
            target = min(self.per_slot, math.ceil(n / len(self.slots))) if self.slots else 0
            for s in self.slots:
                s.keep_spares(POOL, target, compiler=True)
