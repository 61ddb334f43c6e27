"""Evaluator: build pool, execution workers, reference workers; one EvalResult per candidate.

A candidate moves through three stages, each with its own pool, so that they overlap:
(1) build: a fresh build worker (pre-spawned, no GPU visible) imports the candidate and constructs
its model (construct.py) so that its load_inline calls, also those in ``__init__``, build into the
content-hash cache (``evidence.slot_builds`` counts any the slot's workers still compile); the
pool is sized so that builds x ninja jobs ~ CPU cores (oversubscribing only delays every build's finish, and the GPU waits
on the first). (2) reference: inputs, outputs and baselines of a task come from one of
``harness.reference_workers`` reference workers, once per task, started at submit time so it
overlaps the builds and other tasks' references; only its timing takes the GPU lock (ahead of
waiting candidates), and candidates need only its outputs: its timing and profile (speedup,
floor) are joined when the candidate is done. (3) execution: once both are ready, the candidate takes one of ``harness.resident`` tokens of a
slot (a GPU), and a pre-spawned worker there loads the cached build and runs the trials beside
the other resident candidates; the GPU lock (``_Slot.exclusive``) is held only for the timed
calls, the profiled run, ncu and the parent's judging, and while it is held the slot's other
workers are stopped, so nothing overlaps a timed call (their phase limits exclude the pause).
The parent compares the outputs. A worker that dies or overruns is killed and the slot gets a
new one. Per-phase wall times go into ``evidence["phases_s"]`` (see README, "Evidence keys"):
``gpu_wait``/``gpu_held`` are the time waiting for and holding the lock; ``Evaluator.timeline``
keeps the held sections and phases on the parent's clock.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import contextlib
import copy
import gc
import hashlib
import heapq
import itertools
import json
import os
import queue
import random
import re
import secrets
import signal
import threading
import time
from typing import Any

import torch

from rewards.harness import (
    baselines,
    buildorder,
    cacheguard,
    cachemac,
    cachewatch,
    compilerspares,
    floor,
    gpulock,
    hostmem,
    oom,
    pchwarm,
    precision,
    protocol,
    sysprof,
    timing,
)
from rewards.harness.compare import compare, zeros_would_pass
from rewards.harness.config import HarnessConfig
from rewards.harness.result import EvalResult
from rewards.harness.sandbox import Policy, Worker


class PhaseTimeout(Exception):
    pass


class WorkerDied(Exception):
    pass


class WorkerRaised(Exception):
    pass


# after the phase limit, how long a started message may take to arrive before the worker is
# killed: a worker that sends half a frame, or a memfd tag and no fd, must not hang the parent
MESSAGE_GRACE_S = 30.0


class _Pauses:
    """Seconds each worker spent stopped (SIGSTOP) while another held its GPU for timing: a
    phase's limit counts the worker's own time, so a loading candidate paused behind other
    candidates' timed calls does not time out for it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._total: dict[int, float] = {}
        self._since: dict[int, float] = {}

    def stop(self, w: Worker) -> None:
        with self._lock:
            self._since[id(w)] = time.perf_counter()

    def resume(self, w: Worker) -> None:
        with self._lock:
            t = self._since.pop(id(w), None)
            if t is not None:
                self._total[id(w)] = self._total.get(id(w), 0.0) + time.perf_counter() - t

    def of(self, w: Worker) -> float:
        with self._lock:
            t = self._since.get(id(w))
            return self._total.get(id(w), 0.0) + (time.perf_counter() - t if t is not None else 0.0)

    def forget(self, w: Worker) -> None:
        with self._lock:
            self._total.pop(id(w), None)
            self._since.pop(id(w), None)


PAUSES = _Pauses()


def ask(w: Worker, job: dict | protocol.Sealed | None, timeout: float) -> dict:
    killed, done = threading.Event(), threading.Event()
    t0, p0 = time.perf_counter(), PAUSES.of(w)

    def left(limit: float) -> float:  # seconds to the limit, not counting time spent paused
        return t0 + limit + PAUSES.of(w) - p0 - time.perf_counter()

    dogs: list[threading.Timer] = []

    def arm(after: float) -> None:
        dog = threading.Timer(after, watchdog)
        dog.daemon = True
        dogs.append(dog)
        dog.start()

    def watchdog():
        if done.is_set():
            return
        rest = left(timeout + MESSAGE_GRACE_S)
        if rest > 0:  # the worker was paused meanwhile: its limit moved
            arm(rest)
            return
        killed.set()
        w.kill_process()

    arm(timeout + MESSAGE_GRACE_S)
    try:
        if job is not None:
            protocol.send(w.conn, job)
        while not w.conn.poll(max(0.0, min(left(timeout), 1.0))):
            if left(timeout) <= 0:
                raise PhaseTimeout(f"no answer within {timeout:.0f} s")
        res = protocol.recv(w.conn, MESSAGE_GRACE_S)
    except (EOFError, OSError, ConnectionError) as e:
        if killed.is_set():
            raise PhaseTimeout(f"a message did not arrive within {timeout + MESSAGE_GRACE_S:.0f} s") from e
        try:
            w.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - still alive after closing its end: kill below
            pass
        raise WorkerDied(w.exit_reason()) from e
    except PhaseTimeout:
        raise
    except Exception as e:  # noqa: BLE001 - an unreadable message (weights_only refused it)
        raise WorkerDied(f"worker sent an unreadable message ({type(e).__name__}: {str(e)[:200]})") from e
    finally:
        done.set()
        for dog in list(dogs):
            dog.cancel()
    if isinstance(res, dict) and res.get("exception"):
        if res.get("fatal"):  # a CUDA fault: the worker exits itself; treat as a crash
            raise WorkerDied(f"CUDA fault ({res['exception']})")
        err = WorkerRaised(res["exception"])
        err.res = res  # what else the worker said (``compiles``: evidence.slot_builds)
        raise err
    return res


def _first_error_line(log: str) -> str:
    for line in log.splitlines():
        if re.search(r"\berror\b", line, re.I) and "Error building extension" not in line:
            return line.strip()[:300]
    return ""


def _same(xs: list) -> bool:
    """Every list of tensors in ``xs`` equals the first (more than one list)."""
    return len(xs) > 1 and all(len(a) == len(xs[0]) and all(torch.equal(p, q) for p, q in zip(a, xs[0], strict=True))
                               for a in xs[1:])


def unverifiable_reason(trials: list, refs_constant: bool | None = None) -> str | None:
    """Why correctness cannot be checked on this task, or None: the reference's outputs are the
    same across the correctness trials although their tensor inputs differ. ``refs_constant``:
    that comparison of the outputs when the caller already made it."""
    if refs_constant is None:
        refs_constant = _same([refs for _, refs in trials])
    ins = [[x for x in xs if isinstance(x, torch.Tensor)] for xs, _ in trials]
    if not refs_constant or _same(ins):
        return None
    return (f"the reference's outputs are identical across its {len(trials)} correctness trials although "
            "the inputs differ, so its output does not depend on its inputs and correctness cannot be checked")


@contextlib.contextmanager
def instrumentation(ev: dict, what: str):
    """The harness's own instrumentation (profilers, ncu): a failure is recorded as
    ``profiling_error`` (the first one, one sentence) and never changes the candidate's status."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - whatever broke, it was the harness's measuring, not the program
        ev.setdefault("profiling_error", f"{what} failed ({type(e).__name__}: {str(e).strip()[:300]})")


def _lru_insert(cache: collections.OrderedDict, key, value, limit: int, evict=None) -> None:
    """Put ``value`` at the fresh end of ``cache``; drop the stalest entries beyond ``limit``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > max(1, limit):
        old = cache.popitem(last=False)[1]
        if evict is not None:
            evict(old)


class _Slot:
    """One execution slot (a GPU, or a CPU worker) with pre-spawned spare workers per role:
    ``candidate`` (correctness, timing and, with ``profile_worker: same``, the profiled run after
    the timing) and, on CUDA, ``profiler`` (references' profiled runs; with ``profile_worker:
    fresh`` candidates' too, the profiler started ahead). Either way neither CUPTI's start-up
    nor its lingering hooks touch a timing.

    ``lock`` is held only for what must be alone on the device: timed calls, the profiled run,
    ncu, the reference's timing (and the parent's judging on it). Starting workers, loading
    candidates and their correctness trials run beside it; ``exclusive`` stops (SIGSTOP) every
    other worker of the slot while the lock is held, so none of their GPU work overlaps a timed
    call. Up to ``harness.resident`` candidates are loaded at once (a token each in the
    evaluator's slot queue), which bounds the GPU memory they take."""

    def __init__(self, ev: Evaluator, index: int, gpu: str | None, depth: dict[str, int]):
        self.ev, self.index, self.gpu = ev, index, gpu
        self.lock = gpulock.PriorityLock()  # whoever times work on this device holds it (timings stay clean)
        self.depth = depth  # spares kept per role: enough that the next one is warm when taken
        # spares per pool: a role's (kept at ``depth``), and compilerspares.POOL's (kept by CompilerSpares)
        self.spares: dict[str, collections.deque[Worker]] = {r: collections.deque() for r in [*depth, compilerspares.POOL]}
        self.members: set[Worker] = set()  # every live worker on this device: spares, candidates, references
        self.ref_profilers: collections.deque[Worker] = collections.deque()  # idle, kept for references' profiles
        self._mu = threading.Lock()  # guards spares and members (several candidates use the slot at once)

    def spawn(self, role: str, spare: bool = False, compiler: bool = False) -> Worker:
        w = self.ev._spawn(role, self.gpu, spare, compiler)
        with self._mu:
            self.members.add(w)
        return w

    def forget(self, w: Worker) -> None:
        with self._mu:
            self.members.discard(w)
            if w in self.ref_profilers:
                self.ref_profilers.remove(w)

    def warm(self) -> None:
        for role, n in self.depth.items():
            with self._mu:
                need = n - len(self.spares[role])
            for _ in range(need):
                w = self.spawn(role, spare=True)
                with self._mu:
                    self.spares[role].append(w)

    @contextlib.contextmanager
    def quiet(self, exempt: Worker | None = None):
        """Hold every other worker of this device stopped while the caller times something on
        it: warming spares (CUDA init, CUPTI start-up), candidates loading or running trials,
        references preparing. An idle spare (its hello sent, or read already by a taker that
        gave it back) is left alone, a compiler spare's import after its hello included (harness
        code, CPU only; compilerspares.py); a worker that ran candidate code is stopped whatever
        its socket shows (the candidate can write to it). Call with ``lock`` held."""
        with self._mu:
            others = [w for w in self.members if w is not exempt]
            spares = {id(w) for q in self.spares.values() for w in q}
        stopped = []
        for w in others:
            try:
                idle = id(w) in spares and (getattr(w, "hello", None) is not None or w.conn.poll(0))
                if w.alive() and not idle:
                    os.kill(w.proc.pid, signal.SIGSTOP)
                    PAUSES.stop(w)
                    stopped.append(w)
            except (ProcessLookupError, OSError, ValueError):  # exited or closed meanwhile
                pass
        try:
            yield stopped
        finally:
            for w in stopped:
                try:
                    os.kill(w.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                PAUSES.resume(w)

    @contextlib.contextmanager
    def exclusive(self, acc: dict, what: str, label: str, exempt: Worker | None = None, quiet: bool = True,
                  priority: int = gpulock.CANDIDATE):
        """The device alone for ``what``: waits for ``lock`` (``acc["gpu_wait"]``; ``priority``:
        gpulock.REFERENCE goes before waiting candidates), holds it with the other workers
        stopped (``acc["gpu_held"]``) and logs the held interval in the evaluator's
        ``timeline``. ``quiet=False``: the parent's own short work (judging)."""
        t0 = time.perf_counter()
        self.lock.acquire(priority)
        t1 = time.perf_counter()
        try:
            with self.quiet(exempt) if quiet else contextlib.nullcontext([]) as stopped:
                yield stopped
        finally:
            t2 = time.perf_counter()
            self.lock.release()
            acc["gpu_wait"] = acc.get("gpu_wait", 0.0) + t1 - t0
            acc["gpu_held"] = acc.get("gpu_held", 0.0) + t2 - t1
            self.ev.timeline.append({"kind": "gpu", "slot": self.index, "what": what, "label": label,
                                     "start": t1, "end": t2})

    def give_back(self, role: str, w: Worker, hello: cf.Future) -> None:
        """An unused worker taken for ``role`` (it ran no candidate code): a spare again while the
        role is short of spares; else dropped. One still starting is given back when it is up."""
        if not hello.done():
            hello.add_done_callback(lambda f: self.give_back(role, w, f))
            return
        if not hello.cancelled() and hello.exception() is None and w.alive():
            w.hello = hello.result()  # read already: the next taker must not wait for another
            with self._mu:
                if len(self.spares[role]) < self.depth.get(role, 0):
                    self.spares[role].appendleft(w)  # already warm: the next one taken
                    return
        self.ev._drop(w)

    def take_spare(self, pool: str) -> Worker | None:
        """A live spare of ``pool`` if there is one (none is started for the taker)."""
        with self._mu:
            q = self.spares[pool]
            w = q.popleft() if q else None  # the oldest: the warmest
        if w is not None and not w.alive():
            self.ev._drop(w)
            return None
        return w

    def keep_spares(self, pool: str, n: int, compiler: bool = False) -> None:
        """``n`` candidate workers in ``pool``: more started, or the newest (the least warm) dropped."""
        extra = []
        with self._mu:
            q = self.spares[pool]
            while len(q) > n:
                extra.append(q.pop())
            need = n - len(q)
        for w in extra:
            self.ev._drop(w)
        for _ in range(need):
            w = self.spawn("candidate", spare=True, compiler=compiler)
            with self._mu:
                self.spares[pool].append(w)

    def take(self, role: str = "candidate") -> Worker:
        w = self.take_spare(role) or self.spawn(role)
        self.warm()  # the replacement warms up while this one works
        return w


class _RefWorker:
    """One reference worker and the slot whose GPU it runs on (its timing takes that slot's lock)."""

    def __init__(self, slot: _Slot):
        self.slot, self.w, self.greeted = slot, slot.spawn("reference"), False

    def renew(self) -> None:
        """A fresh process for the next task: a warm spare where the slot keeps them
        (``harness.reference_spares``), else one started now."""
        fresh = self.slot.take("reference") if "reference" in self.slot.depth else self.slot.spawn("reference")
        old, self.w, self.greeted = self.w, fresh, False
        self.slot.ev._drop(old)

    def ready(self, timeout: float) -> None:
        """A live process that has sent its hello: one that crashed or hung on an earlier task is renewed."""
        if not self.w.alive():
            self.renew()
        if not self.greeted:
            ask(self.w, None, timeout)
            self.greeted = True


class _Ctx:
    """A task's reference context in the cache: its future (the outputs), the baseline's future
    (its timing and profile, which may follow the outputs), the candidates still pending on it
    and the host memory admitted to it (released when none is left and the memory is wanted)."""

    __slots__ = ("future", "baseline", "users", "held", "wanted")

    def __init__(self, future: cf.Future):
        self.future, self.baseline, self.users, self.held = future, cf.Future(), 0, 0
        self.wanted: float | None = None  # when a built candidate (or a caller) first waited for it
        self.baseline.set_running_or_notify_cancel()

    def settled(self) -> bool:
        """Outputs and baseline both done: nothing of the reference's work is in flight."""
        return self.future.done() and self.baseline.done()


class Evaluator:
    def __init__(self, config: HarnessConfig | dict | None = None):
        self.cfg = config if isinstance(config, HarnessConfig) else HarnessConfig.from_mapping(config)
        self.device = self.cfg.resolved_device()
        self.cache = self.cfg.cache_path
        self.arch = None if self.cfg.cuda_arch == "auto" else self.cfg.cuda_arch
        self._ctx: collections.OrderedDict[Any, _Ctx] = collections.OrderedDict()  # least recently used first
        self._ctx_lock = threading.Lock()
        self._ref_queue: list[tuple] = []  # contexts not started yet: (_Ctx, key, task, overrides, submitted)
        self._ctx_serial = 0  # keys the staged inputs and device copies: an evicted ctx's id() may be reused
        self.host = hostmem.HostMemory(hostmem.budget_bytes(self.cfg.host_memory_gb), self.cfg.host_memory_patience_s)
        self._pending: set[cf.Future] = set()
        self._pending_lock = threading.Lock()
        self._build_queue: list = []  # (-guessed seconds, submit order, job): _next_build pops the longest
        self._build_seq, self._build_qlock, self._last_submit = itertools.count(), threading.Lock(), 0.0
        self._workers: set[Worker] = set()  # every live worker, so an interrupted run leaves none
        self._wlock = threading.Lock()
        self._closing = False
        self._staged: collections.OrderedDict[int, protocol.Sealed] = collections.OrderedDict()
        self._dev_refs: collections.OrderedDict[tuple, dict] = collections.OrderedDict()
        self.task_timings: list[dict] = []  # per task: reference prepare / compile / baseline seconds
        # what held each device when, and the candidates' phases: on the parent's clock, for
        # checking that timed sections never overlap (the last ``timeline_entries``)
        self.timeline: collections.deque[dict] = collections.deque(maxlen=self.cfg.timeline_entries)
        self.info: dict = {}
        self.startup_s: dict[str, float] = {}  # __enter__'s phases, seconds
        self._sandbox: Policy | None = None
        self._seals: cacheguard.BuildSeals | None = None
        self.cache_watch: cachewatch.Watch | None = None
        self.pch: dict = {"mode": "off"}  # the shared PCH (build_speed.pch): off | use, and its prebuild
        self._pch_ready = threading.Event()  # set when the prebuild has ended (or none runs)
        self._pch_ready.set()
        self._pch_checked = threading.Event()  # set when pchwarm.verify has ended (or none runs)
        self._pch_checked.set()
        self._compilers = compilerspares.CompilerSpares([], 0, False)  # __enter__ gives it the slots

    # -- lifecycle ---------------------------------------------------------------
    def __enter__(self) -> Evaluator:
        t = time.perf_counter()

        def mark(phase: str) -> None:  # where __enter__'s time went (startup_s; printed by the bench)
            nonlocal t
            now = time.perf_counter()
            self.startup_s[phase] = round(now - t, 3)
            t = now

        os.makedirs(self.cache, exist_ok=True)
        self._guards()
        mark("guards")
        n_exec = self.cfg.n_exec_workers(self.device)
        gpus = self._visible_gpus()[:n_exec] if self.device == "cuda" else [None] * n_exec
        # a token per candidate that may be loaded on a slot at once (harness.resident), and as
        # many warm candidate workers, so that candidates starting together all start warm
        self.resident = self.cfg.n_resident(self.device)
        depth = {"candidate": self.resident}
        if self.device == "cuda" and self.cfg.profile:  # same: only references' profiles take a profiler
            depth["profiler"] = self.cfg.n_profiler_spares(self.device) if self.cfg.profile_worker == "fresh" else 0
        n_ref_spares = self.cfg.n_reference_spares(self.device)
        if n_ref_spares:  # renewed after every task's baseline: a warm one replaces it at once
            depth["reference"] = n_ref_spares
        self._all_slots = [_Slot(self, i, g, depth) for i, g in enumerate(gpus)]
        if self.device == "cuda" and self.arch is None:  # the builds' one arch: the first slot's GPU
            self.arch = "{}.{}".format(*torch.cuda.get_device_capability(0))  # (the parent judges on it anyway)
        self._compilers = compilerspares.CompilerSpares(self._all_slots, self.resident, self.cfg.compiler_spares)
        mark("slots")
        self.n_build = self.cfg.n_build_workers()
        self._build_spares: queue.Queue[Worker] = queue.Queue()
        if self.device == "cuda":  # first: builds are the first stage. Started after the slot's spares,
            self._fill_build_spares()  # the first wave waited 10-13 s for its workers (H200, 28 starting)
        mark("build_spares")
        first = _RefWorker(self._all_slots[0])
        self.info = ask(first.w, None, self.cfg.timeouts_s.get("start", 120))
        first.greeted = True
        mark("first_hello")
        self._slots: queue.Queue[_Slot] = queue.Queue()
        self._gather = threading.Lock()  # one run at a time gathers a slot's every token (oom.py)
        for s in self._all_slots:
            s.warm()
            for _ in range(self.resident):
                self._slots.put(s)
        # reference workers (harness.reference_workers), spread over the slots: tasks prepare in parallel
        n_ref = self.cfg.n_reference_workers(self.device)
        self._refs: queue.Queue[_RefWorker] = queue.Queue()
        self._refs.put(first)
        for i in range(1, n_ref):
            self._refs.put(_RefWorker(self._all_slots[i % len(self._all_slots)]))
        self._build_pool = cf.ThreadPoolExecutor(self.n_build, thread_name_prefix="km-build")
        # twice the workers: a thread profiling its reference apart has given its worker back
        self._ref_pool = cf.ThreadPoolExecutor(2 * n_ref, thread_name_prefix="km-ref")
        self._ref_profile_pool = cf.ThreadPoolExecutor(max(1, self.cfg.n_reference_profilers(self.device)),
                                                       thread_name_prefix="km-refprof")
        self._exec_pool = cf.ThreadPoolExecutor(n_exec * self.resident, thread_name_prefix="km-exec")
        self._hello_pool = cf.ThreadPoolExecutor(n_exec * self.resident, thread_name_prefix="km-hello")
        mark("workers")
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is None:  # normal end: let queued candidates finish
            with self._pending_lock:
                pending = list(self._pending)
            cf.wait(pending)
        else:  # interrupted (Ctrl-C, a timeout): kill every worker now, running ones included
            self._closing = True  # no new stage or worker starts from here on
            for p in (self._build_pool, self._ref_pool, self._ref_profile_pool, self._exec_pool, self._hello_pool):
                p.shutdown(wait=False, cancel_futures=True)
            main = threading.current_thread() is threading.main_thread()
            sigs = (signal.SIGINT, signal.SIGTERM) if main else ()
            old = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}  # a 2nd signal must not strand them
            try:
                for w in self._live():
                    w.kill()
            finally:
                for s, h in old.items():
                    signal.signal(s, h)
        for p in (self._build_pool, self._ref_pool, self._ref_profile_pool, self._exec_pool, self._hello_pool):
            p.shutdown(wait=True, cancel_futures=True)
        for w in self._live():
            self._drop(w)
        with self._ctx_lock:
            while self._staged:
                self._staged.popitem()[1].close()
            self._dev_refs.clear()
        with self._pending_lock:
            pending = list(self._pending)
        for f in pending:  # stages cancelled by the interrupt: their callers must not wait forever
            if not f.done():
                f.set_exception(RuntimeError("the evaluator was shut down before this candidate ran"))

    def submit(self, task: Any, candidate_source: str) -> cf.Future:
        """Queue one candidate; the future's result is its EvalResult (never an exception for
        anything the candidate does)."""
        fut: cf.Future = cf.Future()
        fut.set_running_or_notify_cancel()
        with self._pending_lock:
            self._pending.add(fut)
        fut.add_done_callback(self._forget)
        t0 = time.perf_counter()
        ctx = self._context_future(task, fut)  # the reference starts now, overlapping the build
        guess = buildorder.guess_s(candidate_source) if self.cfg.build_order == "longest" else 0.0
        with self._build_qlock:
            heapq.heappush(self._build_queue, (-guess, next(self._build_seq),
                                               (fut, self._stage_build, task, candidate_source, ctx, fut, t0)))
            self._last_submit = time.perf_counter()
        self._build_pool.submit(self._next_build)
        return fut

    def _next_build(self) -> None:
        """Run the queued build guessed longest (``harness.build_order: longest``; buildorder.py),
        once submits have paused for ``build_gather_s``: a batch submitted in a loop is ordered as a
        whole, not taken first come by the pool's idle threads; never longer than 20 pauses (a
        store of thousands submitted in a loop starts building within a second). One call per submit."""
        if self.cfg.build_order == "longest":
            gather = self.cfg.build_gather_s
            limit = time.perf_counter() + 20 * gather
            while (wait := min(self._last_submit + gather, limit) - time.perf_counter()) > 0:
                time.sleep(wait)
        with self._build_qlock:
            _, _, job = heapq.heappop(self._build_queue)
        self._guard(*job)

    def _guards(self) -> None:
        """The sandbox policy and the cache seals, once: in ``__enter__``, or on the first build of
        an evaluator used only to build (rewards/executors/ray_exec.py), whose build workers run
        candidate code just the same."""
        if self._seals is not None:
            return
        c = self.cfg  # what isolates candidate processes here (probed once; strict raises)
        os.makedirs(self.cache, exist_ok=True)
        pch = [pchwarm.pch_root(self.cache)] if c.pch_wanted(self.device) else []
        for d in pch:
            os.makedirs(d, exist_ok=True)
        self._sandbox = Policy(c.sandbox, self.cache, c.sandbox_hide, c.sandbox_uids, c.network_namespace,
                               c.sandbox_ncu_uid, read_only=pch)
        self._seals = cacheguard.BuildSeals(self.cache, c.cache_key_file,  # creates the MAC key
                                            settle_timeout_s=c.timeouts_s["start"] + c.timeouts_s["build"])
        self.cache_watch = cachewatch.Watch(self._seals, self.cache, c.cache_key_file)
        if pch:
            self._start_pch()

    def _start_pch(self) -> None:
        """Shared PCHs (pchwarm.py): checked, then made, in the background by processes that run no
        candidate code; builds wait for the check, and for the making up to ``pch_wait_s``. Only
        where workers cannot write them."""
        if not self._sandbox.guards_cache:
            self.pch = {"mode": "off", "why": "the sandbox cannot keep workers from writing a shared PCH"}
            return
        self.pch = {"mode": "use", "discarded": []}
        sw = {k: v for k, v in self.cfg.build_speed.items() if k not in ("pch_cflags", "pch_wait_s")}
        self._pch_checked.clear()
        self._pch_ready.clear()

        def check() -> None:
            t0 = time.perf_counter()
            try:  # every evaluator start hashes them all (~5.5 GB, 4.2 s on the H100 host before the
                found = pchwarm.verify(self.cache, self.cfg.cache_key_file)  # first build could start)
            except Exception as e:  # not checked: none may be used, the prebuild makes them again
                pchwarm.discard_all(self.cache)
                found = [{**cachemac.problem("pch", "*", "unreadable"), "error": f"{type(e).__name__}: {e}"[:300]}]
            if found:
                pchwarm.forget(self.cache)
                self.cache_watch.events.append({"time": time.time(), "found": found, "attributed": False, "suspects": 0})
            self.pch.update(discarded=found, verify_s=round(time.perf_counter() - t0, 3))

        def run():
            try:
                try:
                    check()
                finally:
                    self._pch_checked.set()
                t0 = time.perf_counter()
                got = pchwarm.prebuild(self.cache, sw, self.cfg.build_speed.get("pch_cflags", [[]]),
                                       self.cfg.cache_key_file, arch=self.arch)
                self.pch.update(got, prebuild_s=round(time.perf_counter() - t0, 1))
            except Exception as e:  # builds go without it
                self.pch.update(ok=False, errors=[f"{type(e).__name__}: {e}"[:300]])
            finally:
                self._pch_ready.set()

        threading.Thread(target=run, name="km-pch", daemon=True).start()

    def _wait_pch(self, ph: dict) -> None:
        """A build waits for the shared PCHs' check (seconds; no build may read one unchecked),
        and, while they are being made, for them (up to ``build_speed.pch_wait_s``): made on an
        idle machine in ~15 s, they cut every build about in half, while builds started beside the
        prebuild went without them and slowed it down (H200, a fresh cache: 2 of 24 builds used
        one, prebuild 65 s). Only a fresh cache waits for the making."""
        if self._pch_ready.is_set():
            return
        t0 = time.perf_counter()
        self._pch_checked.wait()
        self._pch_ready.wait(max(0.0, float(self.cfg.build_speed.get("pch_wait_s", 120)) - (time.perf_counter() - t0)))
        ph["pch_wait"] = round(time.perf_counter() - t0, 3)

    def build(self, candidate_source: str, fast_build: bool | None = None) -> EvalResult:
        """Build only (fills the cache): status ``compile_error``/``timeout``, else ``invalid``
        with ``compiled`` True; ``build_s`` and ``cache_hit`` as in a full evaluation."""
        self._guards()
        r = self._new_result()
        self._build_sealed(candidate_source, r, r.evidence, self.cfg.fast_build if fast_build is None else fast_build)
        return r

    # -- stages ------------------------------------------------------------------
    def _forget(self, fut: cf.Future) -> None:
        with self._pending_lock:
            self._pending.discard(fut)

    def _guard(self, fut: cf.Future, fn, *args) -> None:
        try:
            if self._closing:
                raise RuntimeError("the evaluator was shut down before this candidate ran")
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - a harness bug must reach the caller, not hang it
            if not fut.done():
                fut.set_exception(e)

    def _new_result(self) -> EvalResult:
        r = EvalResult(status="invalid", device=self.device, gpu=self.info.get("gpu"),
                       torch=torch.__version__, cuda=torch.version.cuda)
        r.evidence = {"worker_restarts": 0, "phases_s": {}, "sandbox": dict(self._sandbox.evidence) if self._sandbox else {}}
        return r

    def _stage_build(self, task: Any, src: str, ctx: cf.Future, fut: cf.Future, t0: float) -> None:
        r = self._new_result()
        self.cache_watch.begin(r)  # from here until _finish its workers may run its code
        ph = r.evidence["phases_s"]
        ph["queue"] = time.perf_counter() - t0
        self._compilers.want(r, src)  # torch.compile: its worker imports the compiler beside the build
        t1 = time.perf_counter()
        ok = self._build_sealed(src, r, r.evidence, self.cfg.fast_build, task)
        ph["build"] = time.perf_counter() - t1
        if not ok:
            fut.set_result(self._finish(r, t0))
            return
        t2 = time.perf_counter()
        self._want(ctx)

        def ready(_):
            ph["ref_wait"] = time.perf_counter() - t2
            try:
                self._exec_pool.submit(self._guard, fut, self._stage_exec, task, src, ctx, r, fut, t0,
                                       time.perf_counter())
            except RuntimeError as e:  # shut down meanwhile (Ctrl-C, SIGTERM): the caller is told, quietly
                if not fut.done():
                    fut.set_exception(e)
        ctx.add_done_callback(ready)

    def _stage_exec(self, task: Any, src: str, ctxf: cf.Future, r: EvalResult, fut: cf.Future, t0: float,
                    t_ready: float) -> None:
        ev = r.evidence
        try:
            ctx = ctxf.result()
        except (WorkerRaised, WorkerDied, PhaseTimeout) as e:  # the reference failed: not the candidate's fault
            r.status, r.error = "invalid", f"reference failed: {e}"
            fut.set_result(self._finish(r, t0))
            return
        self._fill_ref(ctx, r, ev)
        if ev.get("cache_entries") and not self._build_checked(task, src, r, ev):
            self._join_baseline(ctx, r, fut, t0)
            return
        retry = self.cfg.oom_retry_alone and self.resident > 1
        before = copy.deepcopy(vars(r)) if retry else None  # what a run alone on the slot starts from
        self._resident_run(ctx, src, r, t_ready, alone=False)
        if retry and oom.out_of_memory(r.status, r.error):
            first = r.error
            for k, v in before.items():  # the same object: the cache watch knows it by id
                setattr(r, k, v)
            r.evidence["oom_retry"] = {"first_error": first[:400]}
            self._resident_run(ctx, src, r, time.perf_counter(), alone=True)
        self._join_baseline(ctx, r, fut, t0)

    def _resident_run(self, ctx: dict, src: str, r: EvalResult, t_ready: float, alone: bool) -> None:
        """Load, judge, time and profile the candidate on a resident place (``alone``: with every
        resident place of that slot, oom.py)."""
        ev, ph = r.evidence, r.evidence["phases_s"]
        # host memory for its trial outputs (sent at once) before a token: a candidate waiting for
        # memory must not keep a token from one that fits
        t_host = time.perf_counter()
        self._evict_idle(ctx["candidate_bytes"])
        held = self.host.acquire("candidate", ctx["candidate_bytes"])
        ph["host_wait"] = time.perf_counter() - t_host
        # a resident token (the GPU lock is taken inside, only to time); alone: all of one slot's
        tokens = self._all_tokens() if alone else [self._slots.get()]
        try:
            if alone:
                ev["oom_retry"].update(self._shed_device_memory(tokens[0], ctx))
            # from ready to a token: the exec pool's queue, host memory and the slot queue
            t1 = time.perf_counter()
            ph["slot_wait"] = t1 - t_ready
            ph["gpu_wait"] = ph["gpu_held"] = 0.0
            # last check before the load: what failed now is discarded and the worker builds it
            cacheguard.note(ev, self._seals.before_load(ev.get("cache_entries", [])))
            self._execute(tokens[0], src, ctx, r, ev)
            ph["slot_held"] = time.perf_counter() - t1  # resident on the slot; gpu_held: alone on it
        finally:
            self.host.release("candidate", held)
            for s in tokens:
                self._slots.put(s)

    def _shed_device_memory(self, slot: _Slot, ctx: dict) -> dict:
        """Before a run alone on ``slot``: the parent's device copies of other tasks' reference
        outputs and its allocator's cached blocks go back to the device (session 19: the parent
        held 22.6 GiB of the H100 when level_3_problem_6 ran out of memory alone). Returns the
        device's free memory before and after, for the evidence."""
        if self.device != "cuda" or not torch.cuda.is_available():
            return {}
        dev = f"cuda:{slot.index}"
        free0 = torch.cuda.mem_get_info(dev)[0]
        with self._ctx_lock:
            for key in [k for k in self._dev_refs if k[1] == dev and k[0] != ctx["serial"]]:
                del self._dev_refs[key]
        gc.collect()
        with torch.cuda.device(dev):
            torch.cuda.empty_cache()
        return {"free_gib_before": round(free0 / 2**30, 2),
                "free_gib_shed": round(torch.cuda.mem_get_info(dev)[0] / 2**30, 2)}

    def _all_tokens(self) -> list[_Slot]:
        """Every resident token of one slot, so no other candidate is loaded there. One gatherer
        at a time (two holding half each would wait for ever); other slots' tokens go back."""
        with self._gather:
            got = [self._slots.get()]
            while len(got) < self.resident:
                s = self._slots.get()
                if s is got[0]:
                    got.append(s)
                else:
                    self._slots.put(s)
                    time.sleep(0.01)  # another GPU's token: let its candidates have it
            return got

    def _join_baseline(self, ctx: dict, r: EvalResult, fut: cf.Future, t0: float) -> None:
        """Finish the candidate once its reference's baseline is there (usually already; else on
        the reference's thread when it is, holding no exec thread or resident place meanwhile)."""
        bf: cf.Future = ctx["baseline_future"]
        t1 = time.perf_counter()

        def done(_):
            try:
                r.evidence["phases_s"]["baseline_wait"] = time.perf_counter() - t1
                try:
                    self._fill_baseline(bf.result(), ctx, r, r.evidence)
                except (WorkerRaised, WorkerDied, PhaseTimeout) as e:  # not the candidate's fault
                    r.status, r.correct, r.speedup, r.speedup_vs_compile = "invalid", False, None, None
                    r.error = f"reference failed: {e}"
                fut.set_result(self._finish(r, t0))
            except BaseException as e:  # noqa: BLE001 - a harness bug must reach the caller, not hang it
                if not fut.done():
                    fut.set_exception(e)
        bf.add_done_callback(done)

    def _finish(self, r: EvalResult, t0: float) -> EvalResult:
        self._compilers.release(r)
        self.cache_watch.end(r, r.evidence)  # its workers are gone: did the cache move meanwhile?
        ph = r.evidence["phases_s"]
        ph["total"] = time.perf_counter() - t0
        r.evidence["phases_s"] = {k: round(v, 3) for k, v in ph.items()}
        return r

    # -- helpers -----------------------------------------------------------------
    def _visible_gpus(self) -> list[str]:
        vis = os.environ.get("CUDA_VISIBLE_DEVICES")
        if vis:
            return [v.strip() for v in vis.split(",") if v.strip()]
        return [str(i) for i in range(max(1, torch.cuda.device_count()))]

    def _worker_env(self, role: str, gpu: str | None, spare: bool, compiler: bool = False) -> dict:
        c = self.cfg
        return {**self._ext_env(None if role == "build" else gpu), "KM_DEVICE": self.device,
                "MAX_JOBS": str(c.build_max_jobs), "KM_NICE": str(c.build_nice if role == "build" else 0),
                precision.ENV: json.dumps(c.precision), "KM_SPARE": "1" if spare else "0",
                sysprof.LAZY_INDUCTOR_ENV: "1" if c.profiler_lazy_inductor else "0",
                "KM_IMPORT_COMPILER": "1" if compiler else "0"}

    def _spawn(self, role: str, gpu: str | None, spare: bool = False, compiler: bool = False) -> Worker:
        if self._closing:
            raise RuntimeError("the evaluator is shutting down")
        env = self._worker_env(role, gpu, spare, compiler)
        w = Worker(role, env, os.path.join(self.cache, "scratch"), self.cfg.network_namespace,
                   None if role == "reference" else self._sandbox)  # the reference runs no candidate code
        with self._wlock:
            self._workers.add(w)
        return w

    def _ext_env(self, gpu: str | None) -> dict:
        """What every process that loads candidate extensions shares: the build cache, the
        build's arch and the one GPU it may see (none for builds)."""
        speed = {**self.cfg.build_speed, "pch": "use" if self.pch["mode"] == "use" else False}
        speed.pop("pch_cflags", None)
        speed.pop("pch_wait_s", None)
        env = {"TORCH_EXTENSIONS_DIR": os.path.join(self.cache, "ext"), "CUDA_VISIBLE_DEVICES": gpu or "",
               "KM_BUILD_SPEED": json.dumps(speed)}  # buildspeed.from_env
        if self.arch:
            env["TORCH_CUDA_ARCH_LIST"] = self.arch
        return env

    def _live(self) -> list[Worker]:
        with self._wlock:
            return list(self._workers)

    def _drop(self, w: Worker) -> None:
        w.cleanup()
        with self._wlock:
            self._workers.discard(w)
        for s in getattr(self, "_all_slots", ()):
            s.forget(w)
        PAUSES.forget(w)

    def _take_build_worker(self) -> Worker:
        """A warm build worker (torch already imported) and a replacement warming up."""
        w = None
        while w is None and not self._build_spares.empty():
            try:
                w = self._build_spares.get_nowait()
            except queue.Empty:
                break
            if not w.alive():
                self._drop(w)
                w = None
        w = w or self._spawn("build", None)
        self._fill_build_spares()
        return w

    def _fill_build_spares(self) -> None:
        while self._build_spares.qsize() < self.n_build:  # candidates submitted together all build warm
            self._build_spares.put(self._spawn("build", None))

    def _context_future(self, task: Any, user: cf.Future | None = None) -> cf.Future:
        """The task's context, prepared once and shared; ``user`` (a candidate's future) keeps it
        cached until that candidate is done."""
        ov = self.cfg.overrides_for(task, self.device)
        k = (task.hash, repr(sorted(ov.items())))
        with self._ctx_lock:
            e = self._ctx.get(k)
            if e is None:
                e = self._ctx[k] = _Ctx(cf.Future())
                e.future.set_running_or_notify_cancel()
                self._ref_queue.append((e, k, task, ov, time.perf_counter()))
                self._ref_pool.submit(self._next_context)  # one job per entry: it takes one
            self._ctx.move_to_end(k)
            if user is not None:
                e.users += 1
        if user is not None:  # outside the lock: a callback on a finished future runs at once
            user.add_done_callback(lambda _: self._ctx_done(e))
        return e.future

    def _ctx_done(self, e: _Ctx) -> None:
        with self._ctx_lock:
            e.users -= 1
        if self.host.waiting():  # an idle context stays cached until its memory is wanted
            self._evict_idle(None)

    def _evict_idle(self, need: int | None) -> None:
        """Drop idle contexts (no pending candidate), least recently used first, until ``need``
        more bytes fit in the host budget (None: every idle one). A later candidate of an
        evicted task prepares it again (its baseline stays cached on disk)."""
        with self._ctx_lock:
            for k, e in list(self._ctx.items()):
                if need is not None and self.host.fits(need):
                    break
                if e.users == 0 and e.settled():  # a baseline still timing would be timed again
                    del self._ctx[k]
                    held, e.held = e.held, 0
                    self.host.release("context", held)

    def _want(self, ctx: cf.Future) -> None:
        """Something waits for this context now (a candidate built, the Planner's profile): its
        preparation goes ahead of tasks nobody waits for yet. Builds finish in their own order,
        and references taken in submission order left built candidates waiting 60-90 s for
        theirs (H100, 24 tasks, 4 reference workers)."""
        with self._ctx_lock:
            for e, *_ in self._ref_queue:
                if e.future is ctx and e.wanted is None:
                    e.wanted = time.perf_counter()

    def _next_context(self) -> None:
        """On a reference thread: a free reference worker, then the context most wanted (the
        earliest waited for, else the earliest submitted), chosen only once a worker is free."""
        rw = self._refs.get()
        with self._ctx_lock:
            i = min(range(len(self._ref_queue)), key=lambda j: (
                self._ref_queue[j][0].wanted is None, self._ref_queue[j][0].wanted or self._ref_queue[j][4]))
            e, k, task, ov, t_submit = self._ref_queue.pop(i)
        self._task_context(rw, k, e, task, ov, t_submit)

    def _task_context(self, rw: _RefWorker, k, e: _Ctx, task: Any, ov: dict, t_submit: float) -> None:
        """Runs on a reference thread, once per (task, shapes), with a free reference worker
        (``harness.reference_workers`` of them: tasks prepare in parallel) and host memory for
        its outputs (``harness.host_memory_gb``). The outputs are published (``e.future``) before
        the baseline is timed unless ``harness.candidates_wait_for_baseline``: candidates need
        only the outputs to load, run trials and be timed; their speedup waits for ``e.baseline``,
        which a profile apart completes on a thread of its own (``harness.reference_profilers``)."""
        pre = {"ref_queue_s": time.perf_counter() - t_submit}  # from the submission to a free worker
        given: list = []

        def give_back() -> None:  # the worker's part is done: the next task may use it meanwhile
            if not given:
                given.append(rw)
                self._refs.put(rw)
        try:
            t0 = time.perf_counter()
            rw.ready(self.cfg.timeouts_s.get("start", 120))
            pre["start_s"] = time.perf_counter() - t0
            need = self._context_bytes(rw, task, ov)
            self._evict_idle(need)
            t0 = time.perf_counter()
            e.held = self.host.acquire("context", need)
            pre["host_wait_s"] = time.perf_counter() - t0
            ctx, tt = self._prepare_task(rw, task, ov, pre)
            with self._ctx_lock:
                self._ctx_serial += 1
                ctx["serial"] = self._ctx_serial
            # what the context keeps, measured (the estimate also covered the worker's copy while sending)
            e.held = self.host.resize("context", e.held, protocol.tensor_bytes(
                [ctx["trials"], ctx.get("trials_eval"), ctx["sets"], ctx["spot"]]))
            # a resident candidate's trial outputs: in its worker and in the memfd it sends them in
            ctx["candidate_bytes"] = 2 * len(self.cfg.trial_modes()) * sum(protocol.tensor_bytes(refs) for _, refs in ctx["trials"])
            ctx["baseline_future"] = e.baseline  # candidates join it after their own timing
            if not self.cfg.candidates_wait_for_baseline:
                e.future.set_result(ctx)
            base, rest = self._time_baseline(rw, task, ov, ctx, tt, give_back)
            if rest is None:
                self._settle(e, ctx, tt, base)
            else:  # the reference worker and this thread go to the next task meanwhile
                give_back()
                self._ref_profile_pool.submit(self._settle_after, e, ctx, tt, rest)
        except BaseException as err:  # noqa: BLE001 - the candidates waiting on it get the error
            self._context_failed(e, err)
        finally:
            give_back()

    def _settle(self, e: _Ctx, ctx: dict, tt: dict, base: dict) -> None:
        """The baseline is complete: candidates join it, the task's timings are recorded."""
        e.baseline.set_result(base)
        if not e.future.done():
            e.future.set_result(ctx)
        tt["cache_tampered"] = ctx.get("cache_tampered") or []
        self.task_timings.append({k: round(v, 3) if isinstance(v, float) else v for k, v in tt.items()})
        if e.users == 0 and self.host.waiting():  # its candidates are gone already (failed builds)
            self._evict_idle(None)

    def _settle_after(self, e: _Ctx, ctx: dict, tt: dict, rest) -> None:
        """On a reference-profile thread: ``rest()`` (the profile apart, then the record stored)."""
        try:
            self._settle(e, ctx, tt, rest())
        except BaseException as err:  # noqa: BLE001
            self._context_failed(e, err)

    def _context_failed(self, e: _Ctx, err: BaseException) -> None:
        if not e.baseline.done():
            e.baseline.set_exception(err)
        if not e.future.done():  # (outputs published already: they stay, and are evicted as usual)
            self.host.release("context", e.held)  # the failure stays cached: later candidates are invalid too
            e.held = 0
            e.future.set_exception(err)

    def _context_bytes(self, rw: _RefWorker, task: Any, ov: dict) -> int:
        """Host bytes a context needs while it is prepared: every trial's and spot check's outputs
        and the inputs, twice (the reference worker's copy and the one it sends). From a meta-device
        pass in the reference worker; 0 when that fails (the measured size is charged afterwards)."""
        c = self.cfg
        try:
            sz = ask(rw.w, {"op": "size", "task_source": task.source, "overrides": ov}, c.timeouts_s.get("start", 120))
        except WorkerRaised:
            return 0  # Swin calls .item() in its constructor: no meta pass
        except (WorkerDied, PhaseTimeout):  # the meta pass ended or hung the process: a fresh one prepares
            rw.renew()
            rw.ready(c.timeouts_s.get("start", 120))
            return 0
        outs = sz["out_bytes"] * (c.trials * len(c.trial_modes()) + c.input_sets + c.spot_checks + 1)
        return 2 * (outs + sz["in_bytes"] * (c.trials + c.input_sets))

    def _prepare_task(self, rw: _RefWorker, task: Any, ov: dict, pre: dict | None = None) -> tuple[dict, dict]:
        """The task's inputs and reference outputs (trials, timing sets, spot checks), and its
        entry of ``task_timings`` (filled further by ``_time_baseline``)."""
        c = self.cfg
        tt = {"task": getattr(task, "id", task.hash), **(pre or {}), "prepare_s": 0.0, "compile_s": 0.0, "baseline_s": 0.0}
        t0 = time.perf_counter()
        # preparing runs beside candidates' loads and trials (a timed section stops this worker
        # meanwhile); only the baseline's timing takes the GPU lock.
        # spot pairs: secret per task; their outputs are the spot checks' references
        job = {"op": "prepare", "task_source": task.source, "overrides": ov,
               "seed": c.seed, "device": self.device, "model_mode": c.model_mode,
               "trial_seeds": [c.seed + 1 + i for i in range(c.trials)],
               "set_seeds": [c.seed + 1001 + i for i in range(c.input_sets)],
               "spot_pairs": timing.spot_pool(random.Random(secrets.randbits(64)), c.input_sets,
                                              c.spot_checks + 1, self._scale())}
        ctx = ask(rw.w, job, c.timeouts_s["baseline"])
        tt["prepare_s"] = time.perf_counter() - t0
        tt["prepare_cpu_s"] = round(ctx.pop("op_cpu_s", 0.0), 3)
        tt["prepare_worker_s"] = round(ctx.pop("op_s", 0.0), 3)  # the rest: start, messages, SIGSTOPs
        tt["prepare_phases"] = ctx.pop("phases", {})
        ctx["task_id"] = tt["task"]
        ctx["overrides"], ctx["task_source"], ctx["trial_seeds"] = ov, task.source, job["trial_seeds"]
        ctx["timed_calls"] = c.calls_for(ctx.get("forward_us"))  # the reference's and every candidate's
        ctx["refs_constant"] = _same([refs for _, refs in ctx["trials"]])
        ctx["unverifiable"] = unverifiable_reason(ctx["trials"], ctx["refs_constant"])
        ctx["spot"] = [(s, f, outs) for (s, f), outs in zip(job["spot_pairs"], ctx["spot"], strict=True)]
        return ctx, tt

    def _time_baseline(self, rw: _RefWorker, task: Any, ov: dict, ctx: dict, tt: dict, give_back) -> tuple[dict, Any]:
        """The reference's timing and profile (``harness.baselines``): from the disk cache when a
        record for this task, GPU, torch and shapes verifies, else measured in the GPU lock (ahead
        of waiting candidates with ``harness.reference_lock_first``) and stored. Returns (the
        record, None), or (None, ``rest``) where a profile apart is left to run off this thread
        (``harness.reference_profilers``): ``rest()`` profiles, stores and returns the record.
        ``give_back`` returns the reference worker to the pool once its part is done."""
        c = self.cfg
        if not c.baselines:
            return {}, None
        n = ctx["timed_calls"]
        bk = baselines.key(task.hash, self.info.get("gpu") or "cpu", torch.__version__, ov, n,
                           {"model_mode": c.primary_mode(), "precision": c.precision})
        tampered: list = []
        base = baselines.load(bk, self.cache, c.cache_key_file, tampered)  # None unless its MAC verifies
        ctx["cache_tampered"] = tampered  # re-measured below; candidates of this task report it
        if base is not None:
            self.cache_watch.baseline(bk, base)
        if base is None or (self._system_job(ctx["dtype"]) and "ref_system_profile" not in base
                            and "ref_profiling_error" not in base):  # a failed profile is not retried
            compile_err = None
            if c.compile_baseline and self.device == "cuda":
                # compilation is CPU work (up to minutes): it does not hold the GPU; its first
                # calls (autotuning) are stopped while a candidate's calls are timed
                t1 = time.perf_counter()
                compile_err = ask(rw.w, {"op": "compile", "warmup": c.warmup},
                                  c.timeouts_s["baseline"]).get("compile_error")
                tt["compile_s"] = time.perf_counter() - t1
            t1 = time.perf_counter()
            prio = gpulock.REFERENCE if c.reference_lock_first else gpulock.CANDIDATE
            profile = self.device == "cuda" and c.profile
            apart = profile and c.profile_reference_apart
            with rw.slot.exclusive(tt, "baseline", str(tt["task"]), rw.w, priority=prio):
                # the candidate's kind of plan (staged, scaled inputs), from a public seed
                plan = timing.make_plan(c.seed, c.input_sets, c.warmup, n * timing.rounds(self.device),
                                        [], 0, self._scale())
                base = ask(rw.w, {"op": "baseline", "warmup": c.warmup, "calls": n,
                                  "plan": plan, "l2_flush_mb": c.l2_flush_mb, "profile": profile and not apart,
                                  "system": self._system_job(ctx["dtype"]),
                                  "profile_calls": c.profiling["system"]["reference_calls"]},
                           c.timeouts_s["baseline"])
                if not apart:
                    self._ncu_reference(base, task, ov, ctx, rw.slot)
            if profile and not apart:
                # CUPTI stays attached after a profiler session and slows later launches: the
                # next task's baseline is timed by a fresh reference worker (warming up now)
                rw.renew()
            tt["baseline_s"] = time.perf_counter() - t1

            def rest() -> dict:
                if apart:
                    t2 = time.perf_counter()
                    self._profile_reference(rw.slot, task, ov, ctx, base, tt, prio)
                    tt["ref_profile_s"] = time.perf_counter() - t2
                if compile_err:
                    base["compile_error"] = compile_err
                base.update(device=self.device, gpu=self.info.get("gpu"), overrides=ov, task_hash=task.hash)
                base["unverifiable"] = ctx["unverifiable"]
                baselines.store(bk, base, self.cache, c.cache_key_file)
                self.cache_watch.baseline(bk, base)
                return base
            if apart and c.n_reference_profilers(self.device):
                return None, rest
            give_back()
            return rest(), None
        if base.get("unverifiable", False) != ctx["unverifiable"]:  # a record from before the check
            base["unverifiable"] = ctx["unverifiable"]
            baselines.store(bk, base, self.cache, c.cache_key_file)
            self.cache_watch.baseline(bk, base)
        return base, None

    def _profiled_run(self, slot: _Slot, pw: Worker, send, ctx: dict, calls: int, acc: dict, label: str,
                      priority: int = gpulock.CANDIDATE) -> dict:
        """A loaded profiler worker's profiled run on the task's first timing set, and its summary:
        the first forward (lazy kernel loading, cuDNN's algorithm search: 2.4-3 s of lock time for
        conv models on the H100) outside the lock with ``profile_warm_early``, paused like trials;
        only the run inside it; the trace read after. ``send(name, job, limit)`` asks ``pw``."""
        c, t = self.cfg, self.cfg.timeouts_s
        xs = [ctx["sets"][0][0]]
        if c.profile_warm_early:
            send("profile_warm", {"op": "warm", "sets": xs}, t["timing"])
        with slot.exclusive(acc, "profile", label, pw, priority=priority):
            send("profile", {"op": "profile", "sets": xs, "calls": calls, "warm": not c.profile_warm_early,
                             "system": self._system_job(ctx["dtype"]), "defer": True}, t["timing"])
        return send("profile_summary", {"op": "profile_summary"}, t["timing"])

    def _ncu_reference(self, base: dict, task: Any, ov: dict, ctx: dict, slot: _Slot) -> None:
        with instrumentation(base, "profiling the reference with ncu"):
            self._ncu(base, "ref_system_profile", "ref_kernel_profile", "reference",
                      {"task_source": task.source, "overrides": ov}, ctx["dtype"], slot.gpu)
        if "profiling_error" in base:
            base.setdefault("ref_profiling_error", base.pop("profiling_error"))

    def _profile_reference(self, slot: _Slot, task: Any, ov: dict, ctx: dict, base: dict, tt: dict, prio: int) -> None:
        """The reference's profiled run in a profiler worker of the slot, as a candidate's is: its
        warming forward outside the lock (``profile_warm_early``), the run alone in it, the trace
        read after, then ncu. A failure is ``ref_profiling_error`` (instrumentation, not the task)."""
        c, label = self.cfg, str(tt["task"])
        pw, hello = self._reference_profiler(slot)
        kept = False
        try:
            hello.result()
            ask(pw, {"op": "load_reference", "task_source": task.source, "overrides": ov, "seed": c.seed,
                     "device": self.device, "model_mode": c.model_mode}, c.timeouts_s["correctness"])
            p = self._profiled_run(slot, pw, lambda name, job, limit: ask(pw, job, limit), ctx,
                                   c.profiling["system"]["reference_calls"], tt, label, prio)
            if c.n_reference_profilers(self.device):  # kept for the next task's reference, its memory freed
                ask(pw, {"op": "unload"}, c.timeouts_s["correctness"])
                with slot._mu:
                    slot.ref_profilers.append(pw)
                kept = True
        except Exception as e:  # noqa: BLE001 - the harness's measuring failed, not the task
            base["ref_profiling_error"] = f"profiling the reference failed ({type(e).__name__}: {str(e).strip()[:300]})"
            return
        finally:
            if not kept:
                self._drop(pw)
        base["ref_kernels"] = [{k: v for k, v in d.items() if k != "origin"} for d in p.get("kernels", [])]
        for k in ("system_profile", "system_events"):
            if k in p:
                base["ref_" + k] = p[k]
        due = self._ncu_due(base, "ref_system_profile", "reference")
        with slot.exclusive(tt, "ncu", label, priority=prio) if due else contextlib.nullcontext():
            self._ncu_reference(base, task, ov, ctx, slot)

    def _reference_profiler(self, slot: _Slot) -> tuple[Worker, cf.Future]:
        """A profiler process for a reference's profile: one kept from an earlier reference (it
        never ran a candidate's code; CUPTI is attached in every profiler process before its first
        profile anyway), else a warm spare of the slot, as a candidate takes one."""
        while True:
            with slot._mu:
                pw = slot.ref_profilers.popleft() if slot.ref_profilers else None
            if pw is None:
                return self._early_profiler(slot)
            if pw.alive():
                done: cf.Future = cf.Future()
                done.set_result(None)
                return pw, done
            self._drop(pw)

    def reference_profile(self, task: Any) -> dict:
        """The reference's profile (system and kernel level), for the Planner before any candidate."""
        ctx = self._context_future(task)
        self._want(ctx)
        base = ctx.result()["baseline_future"].result()
        out = {"ref_runtime_us": base.get("ref_runtime_us"), "system": base.get("ref_system_profile"),
               "kernel": base.get("ref_kernel_profile")}
        if base.get("ref_profiling_error"):  # why "system" is missing (one sentence)
            out["error"] = base["ref_profiling_error"]
        if self.device == "cuda" and self.cfg.profiling["nsys"]["enabled"]:
            from rewards.harness import nsysprobe

            out["nsys"] = nsysprobe.probe(self.cfg.profiling["nsys"]["timeout_s"])
        return out

    def _stage_message(self, ctx: dict) -> dict | protocol.Sealed:
        """The task's trial inputs and timing sets for a candidate worker: on Linux one sealed
        memfd per task, written once and mapped by every worker (LRU of ``staged_tasks``)."""
        msg = {"op": "stage", "data": {"trials": [xs for xs, _ in ctx["trials"]], "sets": [xs for xs, _ in ctx["sets"]]}}
        if not protocol._HAVE_MEMFD:
            return msg
        with self._ctx_lock:
            sealed = self._staged.get(ctx["serial"]) or protocol.Sealed(msg)
            _lru_insert(self._staged, ctx["serial"], sealed, self.cfg.staged_tasks, protocol.Sealed.close)
            return sealed.dup()  # the caller's own handle: an eviction cannot close it mid-send

    def _scale(self) -> tuple[float, float] | None:
        """The per-call factor range for floating-point timed inputs (None: inputs unscaled)."""
        return tuple(self.cfg.timing_scale_range) if self.cfg.timing_input_scaling else None

    def _plan(self, ctx: dict) -> dict:
        """This evaluation's secret plan: a fresh seed the candidate never sees before its calls."""
        c = self.cfg
        return timing.make_plan(secrets.randbits(64), c.input_sets, c.warmup, ctx["timed_calls"] * timing.rounds(self.device),
                                [(s, f) for s, f, _ in ctx["spot"]], c.spot_checks, self._scale())

    def _system_job(self, dtype: str) -> dict | None:
        s = self.cfg.profiling["system"]
        if self.device != "cuda" or not s["enabled"]:
            return None
        return {"record_shapes": s["record_shapes"], "keep_events": s["keep_events"],
                "summary": {"top": s["top"], "gap_us": s["gap_us"], "ceilings": self.cfg.ceilings, "dtype": dtype}}

    def _ncu_due(self, rec: dict, sys_key: str, kind: str) -> bool:
        k = self.cfg.profiling["kernel"]
        return bool(self.device == "cuda" and k["enabled"] and k["reference" if kind == "reference" else "candidates"]
                    and (rec.get(sys_key) or {}).get("top_kernels"))

    def _ncu(self, rec: dict, sys_key: str, out_key: str, kind: str, job: dict, dtype: str, gpu: str | None) -> None:
        """Kernel level (ncu) on the top kernels of ``rec[sys_key]``, when configured."""
        if not self._ncu_due(rec, sys_key, kind):
            return
        from rewards.harness import ncuprof

        k = self.cfg.profiling["kernel"]
        job = {**job, "kind": kind, "seed": self.cfg.seed, "cache_root": self.cache, "fast_build": self.cfg.fast_build,
               "env": self._ext_env(gpu), "model_mode": self.cfg.primary_mode(), "precision": self.cfg.precision,
               "shared_namespace": self.cfg.shared_namespace}  # as the workers have it: cache hits
        rec[out_key] = ncuprof.profile(job, rec[sys_key]["top_kernels"], k, self.cfg.ceilings, dtype,
                                       self.cache, self.info.get("gpu"), self._sandbox)
        if rec[out_key].get("status") in ("failed", "timeout"):  # ncu's failure, not the program's
            raise RuntimeError(f"ncu {rec[out_key]['status']}: {rec[out_key].get('reason', '')}")

    # -- one candidate ------------------------------------------------------------
    def _build_sealed(self, src: str, r: EvalResult, ev: dict, fast_build: bool, task: Any = None) -> bool:
        """``_build``, then the orchestrator seals what the worker compiled and checks what it
        reused (cacheguard.py): an entry found changed is discarded, listed in
        ``evidence.cache_tampered`` and built once more."""
        cacheguard.note(ev, self._seals.before_load(self._seals.known(src)))  # before the worker imports them
        for _ in range(2):
            with self._seals.building():
                ok = self._build(src, r, ev, fast_build, task)
                bad = self._seals.after_build(ev.get("cache_entries", []))
            cacheguard.note(ev, bad)
            if not bad:
                break
        self._seals.remember(src, ev.get("cache_entries", []))
        return ok

    def _build_checked(self, task: Any, src: str, r: EvalResult, ev: dict) -> bool:
        """Before the slot: entries that fail their seals now are built again in the pool (not
        on the GPU slot's time); False when that build fails (``r`` says why)."""
        bad = self._seals.before_load(ev.get("cache_entries", []))
        if not bad:
            return True
        cacheguard.note(ev, bad)
        again = self._new_result()
        ok = self._build_sealed(src, again, again.evidence, self.cfg.fast_build, task)
        ev["cache_entries"] = again.evidence.get("cache_entries", [])
        cacheguard.note(ev, again.evidence.get("cache_tampered", []))
        if not ok:
            r.status, r.error, r.log_tail = again.status, again.error, again.log_tail
        return ok

    def _build(self, src: str, r: EvalResult, ev: dict, fast_build: bool, task: Any = None) -> bool:
        job = {"op": "build", "source": src, "cache_root": self.cache, "fast_build": fast_build}
        if task is not None:  # the candidate imports with the reference's names, as it will run,
            # and its model is constructed there, so builds in __init__ happen in the pool too
            job.update(task_source=task.source, overrides=self.cfg.overrides_for(task, self.device),
                       shared_namespace=self.cfg.shared_namespace, seed=self.cfg.seed,
                       construct=self.cfg.build_construct)
        crashed = None
        self._wait_pch(ev["phases_s"])
        # a build worker that dies while constructing (a constructor that crashes only without a
        # GPU) must not make a compile error: build once more without constructing, as before
        for attempt in (job, {**job, "construct": {**(job.get("construct") or {}), "enabled": False}}):
            t0 = time.perf_counter()
            w = self._take_build_worker()
            try:
                ask(w, None, self.cfg.timeouts_s.get("start", 120))
                ev["phases_s"]["build_start"] = round(time.perf_counter() - t0, 3)  # a warm worker: ~0
                b = ask(w, attempt, self.cfg.timeouts_s["build"])
                break
            except PhaseTimeout:
                r.status, r.error, r.log_tail = "timeout", "build exceeded its time limit", w.log_tail()
                return False
            except WorkerDied as e:
                if crashed is None and (attempt.get("construct") or {}).get("enabled"):
                    crashed = str(e)[:300]
                    continue
                r.status, r.error, r.log_tail = "compile_error", f"the build worker failed ({e})", w.log_tail()
                return False
            except WorkerRaised as e:
                r.status, r.error, r.log_tail = "compile_error", f"the build worker failed ({e})", w.log_tail()
                return False
            finally:
                log = w.log_tail(20000)
                self._drop(w)
        r.build_s, r.cache_hit = round(b["build_s"], 3), b["cache_hit"]
        ev["cache_entries"] = cacheguard.entries_of(b)  # the worker's word: checked, never trusted
        if b.get("fast_build"):
            ev["fast_build"] = b["fast_build"]
        ev["build_compiles"] = b.get("compiles", 0)
        for k in ("construct", "construct_error", "failed_builds"):
            if b.get(k):
                ev[k] = b[k]
        if "construct_s" in b:
            ev["phases_s"]["build_construct"] = b["construct_s"]
        if crashed is not None:
            ev["construct"], ev["construct_error"] = "crashed", f"the build worker died ({crashed}); built again without"
        if not b["ok"]:
            msg = b.get("message", "")
            line = _first_error_line(msg) or _first_error_line(log) or b["error"]
            r.status, r.error, r.log_tail = "compile_error", line, (log + msg)[-2000:]
            return False
        r.compiled = True
        return True

    def _fill_ref(self, ctx: dict, r: EvalResult, ev: dict) -> None:
        refs = [o for _, outs in ctx["trials"] for o in outs]
        if "zeros_would_pass" not in ctx:  # once per task (a benign race: same value)
            ctx["zeros_would_pass"] = zeros_would_pass(refs, self.cfg.atol, self.cfg.rtol)
        ev["zeros_would_pass"] = ev["ref_near_zero"] = ctx["zeros_would_pass"]
        ev["ref_flops"], ev["ref_bytes"] = ctx["ref_flops"], ctx["ref_bytes"]
        ev["model_mode"] = self.cfg.model_mode
        if ctx.get("unverifiable"):
            ev["unverifiable"] = ctx["unverifiable"]

    def _fill_baseline(self, base: dict, ctx: dict, r: EvalResult, ev: dict) -> None:
        """What comes from the reference's timing and profile: its runtime, the speedup, the
        physical floor, the reference's profile (joined after the candidate's own timing)."""
        cacheguard.note(ev, ctx.get("cache_tampered"))  # the cached baseline failed its MAC: measured again
        r.ref_runtime_us, r.ref_compile_runtime_us = base.get("ref_runtime_us"), base.get("ref_compile_runtime_us")
        fl, why = floor.physical_floor(ctx["ref_flops"], ctx["ref_bytes"], ctx["dtype"], self.cfg.ceilings,
                                       self.cfg.tf32_allowed(), r.ref_runtime_us)
        if fl is None:
            ev["floor_skipped"] = why
        else:
            ev["physical_floor_us"] = fl
        if base.get("ref_profiling_error"):
            ev["ref_profiling_error"] = base["ref_profiling_error"]
        if base.get("ref_kernels"):
            ev["ref_kernels"] = base["ref_kernels"]
        for k in ("ref_system_profile", "ref_kernel_profile"):
            if base.get(k):
                ev[k] = base[k]
        if ev.get("spot_check_failed") is False:  # timed, and every spot check agreed
            if r.ref_runtime_us and r.runtime_us:
                r.speedup = r.ref_runtime_us / r.runtime_us
            if r.ref_compile_runtime_us and r.runtime_us:
                r.speedup_vs_compile = r.ref_compile_runtime_us / r.runtime_us

    def _execute(self, slot: _Slot, src: str, ctx: dict, r: EvalResult, ev: dict) -> None:
        c, t, ph = self.cfg, self.cfg.timeouts_s, ev["phases_s"]
        t0 = time.perf_counter()
        w = None
        if self._compilers.wants(r):  # its program calls torch.compile: a worker that imported it
            w = self._compilers.take(slot, r)
            ev["compiler_spare"] = w is not None
        w = w or slot.take()
        ph["take"] = time.perf_counter() - t0  # includes spawning the next spare
        phase, pw = "start", None
        # profile_worker fresh: the profiler worker is taken now and its start-up (CUPTI, 4-8 s)
        # waited for beside the candidate's load and trials, not after its timing (H200: a median
        # 3-4 s of slot time). same: the timed worker profiles after its timing, one process less
        # (session 19: profiler processes were 29% of the host CPU of a cold batch, the bound)
        same = self.cfg.profile_worker == "same"
        early = self._early_profiler(slot) if self.device == "cuda" and c.profile and not same else None
        compiles: dict = {}  # per worker: its compiler runs (cumulative), the builds the pool missed
        label = self._label(ctx, src)

        def timed(name: str, job: dict | None, limit: float, who: Worker | None = None) -> dict:
            t0 = time.perf_counter()
            res = None
            try:
                res = ask(who or w, job, limit)
                return res
            except WorkerRaised as e:
                res = getattr(e, "res", None)
                raise
            finally:  # parent wall per phase; worker_s below says how much was the worker's own
                ph[name] = time.perf_counter() - t0
                self.timeline.append({"kind": "phase", "slot": slot.index, "what": name, "label": label,
                                      "start": t0, "end": t0 + ph[name]})
                if isinstance(res, dict) and "compiles" in res:  # not evidence of the program itself
                    compiles[id(who or w)] = (res.pop("compiles"), res.pop("compile_s", 0.0))
                if isinstance(res, dict):  # the worker's CPU seconds for this phase (start: its hello's start-up)
                    cpu = res.get("op_cpu_s", res.get("cpu_s"))
                    if cpu is not None:
                        ev.setdefault("worker_cpu_s", {})[name] = round(cpu, 3)
        try:
            timed("start", None, t.get("start", 120))
            phase = "correctness"
            staged = self._stage_message(ctx)
            try:
                timed("stage", staged, t["correctness"])  # before the candidate's code is imported
            finally:
                if isinstance(staged, protocol.Sealed):
                    staged.close()
            job = {"op": "load", "source": src, "task_source": ctx["task_source"]}
            job.update(overrides=ctx["overrides"], seed=c.seed, device=self.device, model_mode=c.model_mode,
                       shared_namespace=c.shared_namespace, copy_params=c.copy_params, cache_root=self.cache,
                       fast_build=c.fast_build)
            try:
                loaded = timed("load", job, t["correctness"])
                if "compiler_import" in loaded:  # done while it was a spare (compilerspares.py)
                    ev["compiler_import"] = loaded["compiler_import"]
            except WorkerRaised as e:
                r.status = "invalid" if "defines no `ModelNew`" in str(e) else "runtime_error"
                r.error = str(e)
                return
            res = timed("trials", {"op": "trials", "staged": "trials", "seeds": ctx["trial_seeds"],
                                   "modes": c.trial_modes()}, t["correctness"])
            ph["trials_worker"] = res.get("op_s", 0.0)
            for k in ("precision_flags", "precision_flags_changed"):  # after load and trials; timing updates them
                ev[k] = res.get(k, {})
            dev = ev["judge_device"] = self._judge_device(slot)
            with self._judging(slot, ph, label, dev):
                t0 = time.perf_counter()
                ok = self._judge_modes(res["trials"], ctx, r, ev, dev)
                ph["judge"] = time.perf_counter() - t0
            if not ok:
                return
            phase = "timing"
            plan = self._plan(ctx)
            with slot.exclusive(ph, "time", label, w) as stopped:  # the timed calls: alone on the device
                tr = timed("time", {"op": "time", "staged": "sets", "plan": plan,
                                    "calls": ctx["timed_calls"], "l2_flush_mb": c.l2_flush_mb}, t["timing"])
            ev["spares_paused"] = len(stopped)
            ev["timed_calls"], ev["ref_forward_us"] = ctx["timed_calls"], ctx.get("forward_us")
            ph["time_worker"] = tr.get("op_s", 0.0)
            with self._judging(slot, ph, label, dev):
                t0 = time.perf_counter()
                self._timing(tr, ctx, plan, r, ev, dev)
                ph["judge"] += time.perf_counter() - t0
            if self.device == "cuda" and c.profile and r.status == "ok":
                phase = "profile"
                if same:
                    self._profile(slot, job, src, ctx, ev, timed, [], same=w)
                else:
                    r.log_tail = w.log_tail()
                    self._drop(w)  # timed and done: its GPU memory goes before the profiled run
                    holder: list[Worker] = []
                    try:
                        self._profile(slot, job, src, ctx, ev, timed, holder, early)
                    finally:
                        pw, early = (holder[0] if holder else None), None
        except PhaseTimeout as e:
            r.status, r.correct, r.error = "timeout", False, f"{phase} phase: {e}"
            ev["worker_restarts"] += 1
        except WorkerDied as e:
            r.status, r.correct, r.error = "crashed", False, f"{phase} phase: {e}"
            ev["worker_restarts"] += 1
        except WorkerRaised as e:
            r.status, r.correct, r.error = "runtime_error", False, f"{phase} phase: {e}"
        finally:
            if pw is not None and r.status != "ok":  # the profiled run failed: its log says why
                r.log_tail = pw.log_tail()
            r.log_tail = r.log_tail or w.log_tail()
            ev["slot_builds"] = sum(n for n, _ in compiles.values())  # 0: the build pool built everything
            if ev["slot_builds"]:
                ph["slot_build"] = sum(s for _, s in compiles.values())
            t0 = time.perf_counter()
            for x in (w, pw):
                if x is not None:
                    self._drop(x)
            if early is not None:  # not profiled (incorrect, failed): it ran no candidate code
                slot.give_back("profiler", early[0], early[1])
            ph["drop"] = time.perf_counter() - t0

    def _early_profiler(self, slot: _Slot) -> tuple[Worker, cf.Future]:
        """A profiler worker taken from the slot's spares and a future for its hello."""
        pw = slot.take("profiler")
        if getattr(pw, "hello", None) is not None:  # given back unused (Slot.give_back)
            done: cf.Future = cf.Future()
            done.set_result(pw.hello)
            return pw, done
        return pw, self._hello_pool.submit(ask, pw, None, self.cfg.timeouts_s.get("start", 120))

    def _profile(self, slot: _Slot, job: dict, src: str, ctx: dict, ev: dict, timed, holder: list,
                 early: tuple[Worker, cf.Future] | None = None, same: Worker | None = None) -> None:
        """The profiled run and ncu, after the candidate was judged and timed: a failure of either
        is the harness's instrumentation failing (hooks on a ScriptModule, CUPTI, ncu), so it is
        recorded as ``profiling_error`` and leaves status and timing as measured. ``same``: the
        timed worker, its candidate loaded, starts CUPTI now (its timing is over) and profiles.
        Else a profiler worker (``early``: taken when the candidate started, its hello awaited
        meanwhile) loads the candidate; it goes into ``holder`` (the caller drops it)."""
        c, t, ph = self.cfg, self.cfg.timeouts_s, ev["phases_s"]
        label = self._label(ctx, src)
        with instrumentation(ev, "the profiled run"):
            if same is not None:
                pw, hello = same, timed("profile_start", {"op": "cupti"}, t["timing"])
            else:
                pw, hello_f = early or self._early_profiler(slot)
                holder.append(pw)
                t0 = time.perf_counter()
                try:  # what is left of its start-up: the slot waits only for that
                    hello = hello_f.result()
                finally:
                    ph["profile_start"] = time.perf_counter() - t0
            if same is None and isinstance(hello, dict) and "cpu_s" in hello:  # its start-up, CUPTI's included
                ev.setdefault("worker_cpu_s", {})["profile_start"] = round(hello["cpu_s"], 3)
            if isinstance(hello, dict) and hello.get("warm_up_error"):  # why a later profile op may fail
                ev["profiler_warm_up_error"] = hello["warm_up_error"][:300]
            if same is None:
                timed("profile_load", job, t["correctness"], pw)
            prof = self._profiled_run(slot, pw, lambda name, job, limit: timed(name, job, limit, pw), ctx,
                                      c.profile_calls, ph, label)
            prof.pop("op_s", None)
            prof.pop("op_cpu_s", None)
            ev.update(prof)
        if "profiling_error" in ev:
            return
        t0 = time.perf_counter()
        due = self._ncu_due(ev, "system_profile", "candidate")
        with instrumentation(ev, "ncu"), slot.exclusive(ph, "ncu", label) if due else contextlib.nullcontext():
            self._ncu(ev, "system_profile", "kernel_profile", "candidate",
                      {"task_source": ctx["task_source"], "overrides": ctx["overrides"],
                       "candidate_source": src}, ctx["dtype"], slot.gpu)
        ph["ncu"] = time.perf_counter() - t0

    @staticmethod
    def _label(ctx: dict, src: str) -> str:
        """Names one evaluation in ``timeline``: task and the candidate's source hash."""
        return f"{ctx.get('task_id', '?')}/{hashlib.sha256(src.encode()).hexdigest()[:12]}"

    def _judging(self, slot: _Slot, ph: dict, label: str, dev: str):
        """The parent's comparisons: on the slot's own device (its GPU; on a CPU run the CPU) they
        must not overlap a timed section, so they take the lock briefly (others keep running)."""
        if dev == "cpu" and self.device != "cpu":
            return contextlib.nullcontext()
        return slot.exclusive(ph, "judge", label, quiet=False)

    def _judge_device(self, slot: _Slot) -> str:
        """Where the parent compares outputs: the slot's GPU (it holds the slot; milliseconds,
        where the CPU took ~1.7 s per candidate beside the builds), else the CPU."""
        jd = self.cfg.judge_device
        if jd == "auto":
            return f"cuda:{slot.index}" if self.device == "cuda" and torch.cuda.is_available() else "cpu"
        return jd

    def _ref_outputs(self, ctx: dict, dev: str) -> dict:
        """The task's reference outputs (per trial, per spot pair) on ``dev``; device copies are
        kept for the last ``staged_tasks`` tasks."""
        host = {"trials": [refs for _, refs in ctx["trials"]], "trials_eval": ctx.get("trials_eval") or [],
                "spot": [outs for _, _, outs in ctx["spot"]]}
        if dev == "cpu":
            return host
        key = (ctx["serial"], dev)
        with self._ctx_lock:
            hit = self._dev_refs.get(key)
        if hit is None:  # copied outside the lock; two threads racing make the same copy
            hit = {k: [timing.to_device(outs, dev) for outs in v] for k, v in host.items()}
        with self._ctx_lock:
            _lru_insert(self._dev_refs, key, hit, self.cfg.staged_tasks)
        return hit

    def _judge_modes(self, by_mode: dict, ctx: dict, r: EvalResult, ev: dict, dev: str) -> bool:
        """The primary mode's verdict is the candidate's; under ``both`` the eval-mode trials are
        judged too (``mode_verdicts``, ``mode_dependent``) and a failure there fails the candidate."""
        ok = self._judge(by_mode[self.cfg.primary_mode()], ctx, r, ev, dev)
        if self.cfg.model_mode != "both":
            return ok
        r2, ev2 = EvalResult(), {}
        ok2 = self._judge(by_mode["eval"], ctx, r2, ev2, dev, "trials_eval")
        ev["mode_verdicts"] = {"train": r.status, "eval": r2.status}
        ev["mode_dependent"] = r.status != r2.status
        for k in ("output_aliases_input", "input_mutated"):
            ev[k] = bool(ev.get(k) or ev2.get(k))
        if "non_dense_output" in ev2:
            ev.setdefault("non_dense_output", ev2["non_dense_output"])
        r.max_abs_err = max(r.max_abs_err or 0.0, r2.max_abs_err or 0.0)
        r.max_rel_err = max(r.max_rel_err or 0.0, r2.max_rel_err or 0.0)
        if ok and not ok2:
            r.status, r.correct, r.error = "incorrect", False, f"in eval mode: {r2.error}"
        return ok and ok2

    def _judge(self, trials: list, ctx: dict, r: EvalResult, ev: dict, dev: str, refs_key: str = "trials") -> bool:
        r.trials = len(trials)
        errs, outs = [], []
        refs_all = self._ref_outputs(ctx, dev)[refs_key]
        for tr, refs in zip(trials, refs_all, strict=True):
            if tr["non_dense"]:
                ev["non_dense_output"] = tr["non_dense"]
                errs.append(f"an output is a {tr['non_dense']}, not a plain dense tensor")
                continue
            if tr["aliased"]:
                ev["output_aliases_input"] = True
                errs.append("an output aliases an input")
            if tr["mutated"]:
                ev["input_mutated"] = True
                errs.append("an input changed during the call")
            got = timing.to_device(tr["outputs"], dev)
            if got:
                outs.append(got)
            cmp = compare(got, refs, self.cfg.atol, self.cfg.rtol)
            r.max_abs_err = max(r.max_abs_err or 0.0, cmp["max_abs_err"])
            r.max_rel_err = max(r.max_rel_err or 0.0, cmp["max_rel_err"])
            if not cmp["ok"]:
                errs.append(cmp["error"])
        ev.setdefault("output_aliases_input", False)
        ev.setdefault("input_mutated", False)
        ev["constant_output"] = bool(_same(outs) and not ctx["refs_constant"])
        if errs:
            r.status, r.correct, r.error = "incorrect", False, errs[0]
            return False
        r.status, r.correct = "ok", True
        return True

    def _timing(self, tr: dict, ctx: dict, plan: dict, r: EvalResult, ev: dict, dev: str) -> None:
        stats = timing.stats
        wall = stats(tr["wall_us"])
        ev["wall_us"] = wall["median"]
        if self.device == "cuda":
            evt = stats(tr["event_us"])
            ev["event_us"] = evt["median"]
            ev["timer_ratio"] = wall["median"] / max(evt["median"], 1e-9)
            ev["timer_disagreement"] = bool(ev["timer_ratio"] > self.cfg.timer_disagreement
                                            and wall["median"] - evt["median"] > self.cfg.timer_slack_us)
            # the honest number: events, unless work escaped them (then the host clock)
            main = wall if ev["timer_disagreement"] else evt
        else:
            main = wall
        r.runtime_us, r.runtime_iqr_us = main["median"], main["iqr"]
        for k in ("threads_started", "threads_candidate", "thread_names"):
            if k in tr:
                ev[k] = tr[k]
        ev["precision_flags"] = tr["precision_flags"]
        ev["precision_flags_changed"] = tr.get("precision_flags_changed", {})
        bad, spot_refs = False, self._ref_outputs(ctx, dev)["spot"]
        for i, p in sorted(plan["spot"].items()):  # the parent's plan, not the worker's word, says which
            outs = tr["kept"].get(i)
            if outs is None or not compare(timing.to_device(outs, dev), spot_refs[p], self.cfg.atol, self.cfg.rtol)["ok"]:
                bad = True
        ev["spot_check_failed"] = bad
        ev["timing_inputs_scaled"] = self._scale() is not None
        if bad:
            r.status, r.correct, r.error = "incorrect", False, "a timed call's output disagreed with the reference"


def evaluate(task: Any, candidate_source: str, config: HarnessConfig | dict | None = None) -> EvalResult:
    """Blocking evaluation of one candidate (starts and stops its own workers)."""
    with Evaluator(config) as ev:
        return ev.submit(task, candidate_source).result()
