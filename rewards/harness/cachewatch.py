"""Ties a cache tamper to the candidate that did it, when the timing allows.

The orchestrator watches what it wrote or verified (baseline records, sealed build entries) by
their files' stat fingerprints (inode, size, mtime, ctime: ctime cannot be set back by a
user). When a candidate finishes (its workers gone), anything watched whose fingerprint moved
is verified; what fails is repaired (a baseline stored again from the orchestrator's copy, a
build entry discarded) and blamed: on the finishing candidate alone if it was the only one with
live workers since the last clean check (``evidence.cache_tamper_attributed``, a ``file_tamper``
finding), else on nobody (``events``, the evaluator's log of what it found and repaired).
"""

from __future__ import annotations

import os
import threading
import time

from rewards.harness import baselines, cacheguard, cachemac
from rewards.harness.cachemac import fingerprint


class Watch:
    def __init__(self, seals: cacheguard.BuildSeals, cache_root: str, key_file: str | None = None):
        self.seals, self.cache, self.key_file = seals, cache_root, key_file
        self._base: dict[str, tuple[dict, tuple]] = {}  # baseline key -> (record, fingerprint)
        self._mu = threading.Lock()
        self._active: dict[int, object] = {}  # candidates with a stage running (kept alive here)
        self._since: set[int] = set()  # candidates active at any time since the last check
        self.events: list[dict] = []

    def _bpath(self, k: str) -> str:
        return os.path.join(self.cache, "baselines", k + ".json")

    def baseline(self, k: str, record: dict) -> None:
        """A record the orchestrator stored or verified just now."""
        with self._mu:
            self._base[k] = (record, fingerprint(self._bpath(k)))

    def begin(self, token: object) -> None:
        with self._mu:
            self._active[id(token)] = token
            self._since.add(id(token))

    def end(self, token: object, ev: dict) -> None:
        """The candidate ``token`` is done: check the cache; blame it if it was alone."""
        with self._mu:
            self._active.pop(id(token), None)
            suspects, self._since = self._since, set(self._active)
            found = self._check()
        if not found:
            return
        alone = suspects == {id(token)}
        self.events.append({"time": time.time(), "found": found, "attributed": alone, "suspects": len(suspects)})
        if alone:
            ev.setdefault("cache_tamper_attributed", []).extend(found)

    def _check(self) -> list[dict]:
        found = []
        for k, (rec, fp) in list(self._base.items()):
            if fingerprint(self._bpath(k)) == fp:
                continue
            probs: list = []
            if baselines.load(k, self.cache, self.key_file, probs) is None:  # changed and not ours: repaired
                baselines.store(k, rec, self.cache, self.key_file)
                found += probs or [cachemac.problem("baseline", k, "missing")]
            self._base[k] = (rec, fingerprint(self._bpath(k)))
        found += self.seals.changed()
        return found
