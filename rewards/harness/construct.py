"""Construct the candidate's model in the build worker, so that the extensions it builds at
construction (``load_inline``/``load`` in ``__init__``, in helpers it calls, in ``try:`` blocks)
build in the build pool and the GPU slot's workers (candidate, profiler) load them from the cache.

The model is built as the candidate worker builds it (seeded, ``ModelNew(*get_init_inputs())``
with the reference's names), on the CPU: no GPU is visible here. Anything the construction raises
that is not a build failure (``.cuda()`` with no GPU, graph capture, a warm-up forward) is recorded
and ignored: the builds it reached are cached; any it did not reach are built where the program
runs and counted (``evidence.slot_builds``). A build failure is the candidate's compile error.
Constructing can only move builds; it never changes a verdict, so it is bounded:
- time: ``timeout_s`` of the construction's own time (builds excluded: the build timeout covers
  them); past it ``BudgetExceeded`` (a BaseException, raised again while swallowed) stops it.
- memory: an address-space cap ``memory_gb`` above the worker's (RLIMIT_AS, lifted while a build
  runs so compilers are not capped): an allocation past it raises instead of the OOM killer.
Measured on CPU, one thread (KernelBench Level 3 references): VGG19 (144M params) 0.5 s, 0.55 GB;
1_MLP (671M) 5 s, 2.6 GB; the largest, 2_ShallowWideMLP (2.1B), 23 s, 8.1 GB; most under 0.1 s.
So every model is constructed (a meta-device model would skip load_inline's real build), but only
when the source can build at all (mentions cpp_extension/load_inline), within those caps.
On GPU runs (``KM_DEVICE=cuda``) CUDA placements in the constructor (``.cuda()``, ``.to("cuda")``,
``device="cuda"``) stay on the CPU and ``torch.cuda.is_available()`` says True, so a constructor
that moves weights before building still reaches its builds. ``torch.compile`` returns the model
uncompiled there (``run_compile: false``): compiling a model that is only built for its extensions
imported dynamo and inductor in each build worker, 10-16 s of the build pool per candidate that
calls it in ``__init__`` (H100, 24 tasks), and it builds nothing ``load_inline`` needs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time

import torch
from torch.overrides import TorchFunctionMode

from rewards.harness import buildcache

_REAL_AVAILABLE = torch.cuda.is_available


class BudgetExceeded(BaseException):  # noqa: N818 - not an Exception: `except Exception` must not swallow it
    pass


def may_build(source: str) -> bool:
    return "cpp_extension" in source or "load_inline" in source


def build_failure(e: BaseException | None) -> BaseException | None:
    """The build failure behind ``e`` (itself, or what it was raised from or while handling)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if getattr(e, "km_build_failure", False):
            return e
        e = e.__cause__ or e.__context__
    return None


def _is_cuda(d) -> bool:
    return (isinstance(d, str) and d.startswith("cuda")) or (isinstance(d, torch.device) and d.type == "cuda")


class _CpuForCuda(TorchFunctionMode):
    """CUDA placements stay on the CPU (the constructed model is only for its builds)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        if func is torch.Tensor.to:
            args = tuple("cpu" if i and _is_cuda(a) else a for i, a in enumerate(args))
        return func(*args, **kwargs)


class _Budget:
    """Own-time budget (ticks every 0.25 s) and memory cap, both off while a build runs."""

    def __init__(self, timeout_s: float, memory_gb: float):
        self.timeout_s, self.t0, self.in_builds, self.depth, self.hit = timeout_s, time.perf_counter(), 0.0, 0, False
        self.orig = resource.getrlimit(resource.RLIMIT_AS)
        self.cap = None
        if memory_gb and memory_gb > 0:
            cap = _vm_bytes() + int(memory_gb * 2**30)
            hard = self.orig[1]
            self.cap = cap if hard == resource.RLIM_INFINITY else min(cap, hard)

    def own_s(self) -> float:
        return time.perf_counter() - self.t0 - self.in_builds

    def _tick(self, *_):
        if self.depth == 0 and self.own_s() > self.timeout_s:
            self.hit = True
            raise BudgetExceeded(f"construction took over {self.timeout_s:.0f} s of its own time")

    def _set_cap(self, on: bool) -> None:
        if self.cap is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.cap if on else self.orig[0], self.orig[1]))

    @contextlib.contextmanager
    def build(self):
        self.depth += 1
        self._set_cap(False)
        patched, torch.cuda.is_available = torch.cuda.is_available, _REAL_AVAILABLE  # builds as at module level
        t = time.perf_counter()
        try:
            yield
        finally:
            self.in_builds += time.perf_counter() - t
            torch.cuda.is_available = patched
            self.depth -= 1
            if self.depth == 0:
                self._set_cap(True)

    def __enter__(self):
        self._old = signal.signal(signal.SIGALRM, self._tick)
        signal.setitimer(signal.ITIMER_REAL, 0.25, 0.25)
        buildcache.GUARD[0] = self.build
        self._set_cap(True)
        return self

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, self._old)
        buildcache.GUARD[0] = contextlib.nullcontext
        self._set_cap(False)
        return False


def _uncompiled(model=None, **_kw):
    """``torch.compile`` while constructing: the model itself (as a decorator too)."""
    return (lambda m: m) if model is None else model


@contextlib.contextmanager
def _no_compile(on: bool):
    real = torch.compile
    if on:
        torch.compile = _uncompiled
    try:
        yield
    finally:
        torch.compile = real


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def run(mod, job: dict, cfg: dict, load_reference) -> dict:
    """Construct ``mod.ModelNew`` for its builds. Returns ``construct`` (ok | raised | timeout |
    skipped: why), ``construct_s``, ``construct_error`` and, when a build failed,
    ``build_failure`` (the exception)."""
    if not may_build(job["source"]):
        return {"construct": "skipped: the source cannot build an extension", "construct_s": 0.0}
    t0 = time.perf_counter()
    out: dict = {"construct": "ok"}
    shim = os.environ.get("KM_DEVICE") == "cuda" and cfg.get("cuda_on_cpu", True)
    avail = _REAL_AVAILABLE
    budget = _Budget(float(cfg.get("timeout_s", 60)), float(cfg.get("memory_gb", 16)))
    try:
        ref = load_reference()
        torch.manual_seed(job["seed"])
        init = ref.get_init_inputs()
        with budget, (_CpuForCuda() if shim else contextlib.nullcontext()), _no_compile(not cfg.get("run_compile")):
            if shim:
                torch.cuda.is_available = lambda: True
            try:
                torch.manual_seed(job["seed"])
                mod.ModelNew(*init)
            finally:
                torch.cuda.is_available = avail
    except BaseException as e:  # noqa: BLE001 - the candidate's constructor may raise anything
        if isinstance(e, KeyboardInterrupt):
            raise
        failed = build_failure(e)
        if failed is not None:
            out["build_failure"] = failed
        out["construct"] = "timeout" if isinstance(e, BudgetExceeded) or budget.hit else "raised"
        out["construct_error"] = f"{type(e).__name__}: {str(e).strip()[:300]}"
    out["construct_s"] = time.perf_counter() - t0
    return out
