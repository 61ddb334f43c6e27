"""The orchestrator's seals on build artefacts (``<cache>/ext/<key>``), checked before any
worker is told to load them.

Who computes the MAC: the compile runs inside the build worker (buildcache._load, called from
the candidate's own load_inline while the worker imports and constructs the candidate), so
that process runs candidate code and must never hold the key. The orchestrator seals an entry
after the build worker has reported and exited, over the files as they are then, and checks
the seal itself (not the worker) before a candidate or profiler worker is sent the load job.
Moving the compile into a process that runs no candidate code is not enough on its own:
load_inline's flags are the candidate's (``-B``, ``-fplugin``, linker scripts run programs of
its choosing), so that process would need the sandbox all the same.

Seals live in ``<cache>/seals/ext/<key>.json`` (workers need no access there) and bind the
cache key, the state (``built``: the marker present; ``failed``: a recorded failure) and every
file of the entry. Rules:
- an entry a build worker reports it compiled is sealed, unless a ``built`` seal already
  exists and no longer matches (a worker that claims to have compiled another key's entry
  cannot re-seal what it planted there);
- an entry reported as a cache hit or a served failure, every entry an earlier build of the
  same source used (``known``: checked before the build worker imports anything) and every
  entry before a load are checked; an entry that fails (changed, unsealed, signed under
  another key) is moved aside and deleted, reported as a problem (cachemac.problem), and built
  again by the caller.
What it does not stop: the first build of a key is trusted as it is when the worker reports
(a candidate can change its own fresh ``.so`` before reporting, or plant one under a key no
one built yet, and a later candidate with the same sources loads it); a write between the last
check and the load itself (build workers write ``ext/``: closing that needs builds into their
own scratch, published by the orchestrator); the profiler worker and ncu load after the check.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
import uuid

from rewards.harness import cachemac

# never part of a seal: lock files (a waiting build opens them) and nothing else
_SKIP = frozenset({".km_build_lock", "lock"})
MARKER, FAILED = ".km_done", ".km_failed"  # as buildcache.MARKER / FAILED (no torch import here)


class BuildSeals:
    def __init__(self, cache_root: str, key_file: str | None = None, lock_timeout_s: float = 120.0,
                 settle_timeout_s: float = 720.0):
        self.ext = os.path.join(cache_root, "ext")
        self.seals = os.path.join(cache_root, "seals", "ext")
        self.key = cachemac.load_key(cache_root, key_file)
        self.kid = cachemac.key_id(self.key)
        self.lock_timeout_s = lock_timeout_s
        self.settle_timeout_s = settle_timeout_s  # the longest a build job may run: its start and build limits
        self._mu = threading.Lock()  # one seal/check at a time in this process
        self._fp: dict[str, tuple] = {}  # entries sealed or verified here -> their stat fingerprint
        self._flight = threading.Condition()  # build jobs sent and not yet sealed (``building``)
        self._inflight: set[int] = set()
        self._next_job = 0

    # -- builds in flight ---------------------------------------------------------------
    @contextlib.contextmanager
    def building(self):
        """One build job, from its send to the seals of what it compiled. The worker releases a
        key's build lock when its compile ends and reports later: until this block exits, an entry
        it compiled is finished and unsealed, and ``before_load`` must not take it for a plant."""
        with self._flight:
            job = self._next_job
            self._next_job += 1
            self._inflight.add(job)
        try:
            yield
        finally:
            with self._flight:
                self._inflight.discard(job)
                self._flight.notify_all()

    def _settle(self) -> None:
        """Wait until every build job in flight now has been sealed (later ones are not waited
        for: the wait is bounded by the slowest build already running)."""
        with self._flight:
            now = set(self._inflight)
            self._flight.wait_for(lambda: not (now & self._inflight), self.settle_timeout_s)

    # -- one entry ----------------------------------------------------------------------
    def _seal_path(self, k: str) -> str:
        return os.path.join(self.seals, k + ".json")

    @contextlib.contextmanager
    def _held(self, k: str):
        """The entry's build lock (buildcache takes the same flock to build): no worker compiles
        the key while it is sealed or checked. A lock held past the timeout is not waited on."""
        bdir = os.path.join(self.ext, k)
        if not os.path.isdir(bdir):
            with self._mu:
                yield
            return
        with open(os.path.join(bdir, ".km_build_lock"), "a") as lk:
            end = time.monotonic() + self.lock_timeout_s
            while True:
                try:
                    fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > end:
                        break
                    time.sleep(0.05)
            try:
                with self._mu:  # taken after the flock: a long build of one key blocks no other
                    yield
            finally:
                fcntl.flock(lk, fcntl.LOCK_UN)

    def _state(self, k: str) -> tuple[str, bytes] | None:
        bdir = os.path.join(self.ext, k)
        if not os.path.isdir(bdir) or os.path.islink(bdir):
            return None
        state = "built" if os.path.exists(os.path.join(bdir, MARKER)) else (
            "failed" if os.path.exists(os.path.join(bdir, FAILED)) else "partial")
        return state, cachemac.tree_digest(bdir, _SKIP)

    def _read_seal(self, k: str) -> dict | None:
        try:
            with open(self._seal_path(k)) as f:
                s = json.load(f)
            return s if isinstance(s, dict) else None
        except (OSError, ValueError):
            return None

    def _valid(self, k: str, seal: dict | None, cur: tuple[str, bytes] | None) -> str | None:
        """None when ``cur`` is what ``seal`` sealed, else the reason it is not."""
        if seal is None:
            return "unsealed"
        if seal.get("kid") != self.kid:
            return "other_key"
        if cur is None:
            return "missing"
        state, digest = cur
        ok = seal.get("state") == state and cachemac.verify(self.key, "build:" + state, k, digest, seal.get("mac"))
        return None if ok else cachemac.TAMPER

    def seal(self, k: str) -> str | None:
        """Seal what a build worker compiled; returns a reason when it may not (see the rules)."""
        with self._held(k):
            fp0 = self._fingerprint(k)
            cur, old = self._state(k), self._read_seal(k)
            if cur is None:
                return None  # the build left nothing (a worker that lied about compiling)
            if old is not None and old.get("state") == "built" and old.get("kid") == self.kid:
                return self._valid(k, old, cur)  # a finished build is never re-sealed
            state, digest = cur
            rec = {"kid": self.kid, "state": state, "mac": cachemac.mac(self.key, "build:" + state, k, digest)}
            os.makedirs(self.seals, exist_ok=True)
            tmp = self._seal_path(k) + f".{os.getpid()}.{threading.get_ident()}.tmp"
            with open(tmp, "w") as f:
                json.dump(rec, f)
            os.replace(tmp, self._seal_path(k))
            self._remember_fp(k, fp0[:-1] + self._fingerprint(k)[-1:])  # the seal file is ours
            return None

    def check(self, k: str) -> str | None:
        with self._held(k):
            if k in self._fp and self._fp[k] == self._fingerprint(k):
                # verified or sealed here and not one inode touched since (ctime cannot be set
                # back by a user): no need to hash the entry again
                return None
            fp0 = self._fingerprint(k)
            why = self._valid(k, self._read_seal(k), self._state(k))
            if why is None:
                self._remember_fp(k, fp0)
            return why

    def _remember_fp(self, k: str, before: tuple) -> None:
        """Keep the entry's fingerprint for the fast path only when nothing moved while we hashed
        it (a write during the hash would otherwise be vouched for by a later stat)."""
        now = self._fingerprint(k)
        if now == before:
            self._fp[k] = now
        else:
            self._fp.pop(k, None)

    def _fingerprint(self, k: str) -> tuple:
        return cachemac.fingerprint(os.path.join(self.ext, k), _SKIP) + cachemac.fingerprint(self._seal_path(k))

    def changed(self) -> list[dict]:
        """Entries sealed or verified in this process whose files moved since: checked, and
        discarded (returned as problems) when they fail."""
        out = []
        for k, fp in list(self._fp.items()):
            if self._fingerprint(k) != fp:
                why = self.check(k)
                if why is not None:
                    out.append(self._drop(k, why))
        return out

    def discard(self, k: str) -> None:
        """Move the entry aside (a loader never sees half of it) and delete it and its seal."""
        bdir = os.path.join(self.ext, k)
        with self._mu:
            self._fp.pop(k, None)
            with contextlib.suppress(OSError):
                os.remove(self._seal_path(k))
            aside = os.path.join(self.ext, f".discarded-{k}-{uuid.uuid4().hex[:8]}")
            try:
                os.rename(bdir, aside)
            except OSError:
                return
        shutil.rmtree(aside, ignore_errors=True)

    # -- a build's entries ----------------------------------------------------------------
    def _known_path(self, src: str) -> tuple[str, str]:
        h = hashlib.sha256(src.encode()).hexdigest()
        return os.path.join(os.path.dirname(self.seals), "src", h + ".json"), h

    def known(self, src: str) -> list[dict]:
        """The entries an earlier build of this very source used (signed, so a planted list is
        ignored): checked before the build worker runs, so it never imports a tampered one."""
        p, h = self._known_path(src)
        try:
            with open(p) as f:
                rec = json.load(f)
            body = rec["body"]
            if rec.get("kid") == self.kid and cachemac.verify(self.key, "src", h, body.encode(), rec.get("mac")):
                return _unique(json.loads(body))
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return []

    def remember(self, src: str, entries: list[dict]) -> None:
        if not entries:
            return
        (p, h), body = self._known_path(src), json.dumps([{"key": e["key"]} for e in entries])
        os.makedirs(os.path.dirname(p), exist_ok=True)
        tmp = f"{p}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"kid": self.kid, "mac": cachemac.mac(self.key, "src", h, body.encode()), "body": body}, f)
        os.replace(tmp, p)

    def after_build(self, entries: list[dict]) -> list[dict]:
        """Seal what the build compiled, check what it reused; bad entries are discarded and
        returned as problems (the caller builds once more). An unsealed reused entry is left to
        ``before_load``: a concurrent build of the same key may not have been sealed yet (the caller
        runs this inside ``building``, so that check waits for the others, not for this one)."""
        problems = []
        for e in _unique(entries):
            k = e["key"]
            why = self.seal(k) if e.get("compiled") else self.check(k)
            if why is not None and why != "unsealed":
                problems.append(self._drop(k, why))
        return problems

    def before_load(self, entries: list[dict]) -> list[dict]:
        """Check every entry of the build (built or failed) before a worker loads them; an
        unsealed one is checked again once the builds in flight are sealed, then discarded."""
        why = {e["key"]: self.check(e["key"]) for e in _unique(entries)}
        if "unsealed" in why.values():
            # a concurrent build of the same key may not be sealed yet (session 22's CI failure: a
            # cache hit reported first, and its check here discarded its twin's fresh build)
            self._settle()
            why = {k: self.check(k) if w == "unsealed" else w for k, w in why.items()}
        # "missing": discarded meanwhile (or never built): the worker builds it, nothing to trust
        return [self._drop(k, w) for k, w in why.items() if w is not None and w != "missing"]

    def _drop(self, k: str, why: str) -> dict:
        self.discard(k)
        return cachemac.problem("build", k, why)


def note(ev: dict, problems: list | None) -> None:
    """Add ``problems`` to ``evidence.cache_tampered`` (the key only appears when there are some)."""
    if problems:
        ev.setdefault("cache_tampered", []).extend(problems)


def entries_of(build_reply: dict, limit: int = 64) -> list[dict]:
    """The cache entries a build worker's reply names (``entries``, see buildcache.entries),
    sanitised and bounded."""
    return _unique(build_reply.get("entries") if isinstance(build_reply.get("entries"), list) else [])[:limit]


def _unique(entries: list[dict]) -> list[dict]:
    """One row per key, ``compiled`` if any row compiled it; keys that are not plain hex are
    dropped (the report comes from a process that ran candidate code)."""
    out: dict[str, dict] = {}
    for e in entries or []:
        k = e.get("key") if isinstance(e, dict) else None
        if isinstance(k, str) and 0 < len(k) <= 64 and all(c in "0123456789abcdef" for c in k):
            row = out.setdefault(k, {"key": k, "compiled": False})
            row["compiled"] = row["compiled"] or bool(e.get("compiled"))
    return list(out.values())
