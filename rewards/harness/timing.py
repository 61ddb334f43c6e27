"""Timed calls: planned input sets, L2 flush, CUDA events and host wall clock per call.

Each call first stages its input (outside the timed region): the plan (``make_plan``, drawn by
the parent from a secret seed) says which set, which of ``n_sets + 1`` persistent buffers
receives it (``copy_``), and a per-call factor that floating-point inputs are multiplied by.
So a cache keyed on data_ptr/id/_version returns a stale result for another set or factor, and
a cache keyed on exact content never hits (every call's content is new). The spot-checked calls
(a few at random plus the last) use (set, factor) pairs from a per-task pool whose outputs the
reference computed. Then: flush L2 (write ``l2_flush_mb``), synchronize the device, start the host clock,
record the start event, call, record the end event, synchronize the device (all streams),
stop the host clock. Events see the current stream only; the host clock over a device-wide
sync sees everything, so work hidden on side streams shows up as a wall/event disagreement.

On CPU the host clock is all there is, and on a shared machine a call that loses its core to
another process takes a whole scheduler slice longer, and a multi-threaded op waits at its
barrier for whichever of its threads lost its core (measured on 2 shared cores: a 150 us
reference timed at 84 ms, a 235x "speedup" for an identical candidate). So on CPU: one
intra-op thread while timing (reference and candidate alike), and the calls run in
``CPU_ROUNDS`` rounds, each call's time being its fastest round, since interference only ever
adds time. Every round has its own plan entries, so a content cache does not hit in round 2.
A candidate that raises its own thread count inside forward is not prevented from doing so.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

CPU_ROUNDS = 5  # rounds of the timed calls on CPU; a call's time is its fastest round


def flatten(out: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [y for x in out for y in flatten(x)]
    return [out]


def to_device(xs: list, device: str) -> list:
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def stats(xs: list[float]) -> dict:
    if not xs:
        return {"median": None, "iqr": None}
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return {"median": statistics.median(xs), "iqr": q[2] - q[0]}


def rounds(device: str) -> int:
    return 1 if device == "cuda" else CPU_ROUNDS


def rotation_plan(n_sets: int, warmup: int, timed: int) -> dict:
    """The plan without secrets (set i mod n in its own buffer, factor 1): the reference's timing."""
    e = lambda i: (i % n_sets, i % n_sets, 1.0)  # noqa: E731
    return {"warmup": [e(i) for i in range(warmup)], "timed": [e(i) for i in range(timed)], "spot": {}}


def spot_pool(rng: random.Random, n_sets: int, n: int, scale: tuple[float, float] | None) -> list:
    """``n`` (set, factor) pairs covering the sets in turn; the reference computes their outputs."""
    return [(k % n_sets, rng.uniform(*scale) if scale else 1.0) for k in range(n)]


def spot_seed(seed: int, pool_index: int) -> int:
    """The RNG seed set before a spot-checked forward, in the reference process and in the
    candidate's alike (training-mode dropout and other RNG ops then agree)."""
    return seed + 2001 + pool_index


def make_plan(seed: int, n_sets: int, warmup: int, timed: int, pool: list, n_random: int,
              scale: tuple[float, float] | None) -> dict:
    """Per-entry (set, buffer, factor) for ``warmup`` + ``timed`` calls (``timed`` counts every
    CPU round) and ``spot``: {timed index: pool index} for ``n_random`` random calls and the last."""
    rng = random.Random(seed)
    entry = lambda: (rng.randrange(n_sets), rng.randrange(n_sets + 1), rng.uniform(*scale) if scale else 1.0)  # noqa: E731
    plan = {"warmup": [entry() for _ in range(warmup)], "timed": [entry() for _ in range(timed)]}
    k = min(n_random, timed - 1, len(pool) - 1)
    picks = ((rng.sample(range(timed - 1), k) if k > 0 else []) + [timed - 1]) if pool else []
    plan["spot"] = {}
    for p, i in enumerate(picks):
        s, f = pool[p]
        plan["timed"][i] = (s, rng.randrange(n_sets + 1), f)
        plan["spot"][i] = p
    return plan


def scaled(x: Any, factor: float, out: torch.Tensor | None = None) -> Any:
    """``x`` copied (into ``out`` when given) and, when floating point, multiplied by ``factor``;
    the reference calls this too, so a spot-checked input is the same bits on both sides."""
    if not isinstance(x, torch.Tensor):
        return x
    y = torch.empty_like(x) if out is None else out
    y.copy_(x)
    if factor != 1.0 and (y.is_floating_point() or y.is_complex()):
        y.mul_(factor)
    return y


class _Stager:
    """Persistent buffers per (buffer index, argument): what the candidate sees per call."""

    def __init__(self, sets: list[list]):
        self.sets, self.bufs = sets, {}

    def __call__(self, entry: tuple) -> list:
        s, b, f = entry
        xs = []
        for j, x in enumerate(self.sets[s]):
            if isinstance(x, torch.Tensor):
                buf = self.bufs.get((b, j))
                if buf is None or buf.shape != x.shape or buf.dtype != x.dtype:
                    buf = self.bufs[(b, j)] = torch.empty_like(x)
                x = scaled(x, f, buf)
            xs.append(x)
        return xs


def time_calls(fn: Callable, sets: list[list], device: str, warmup: int, calls: int,
               l2_flush_mb: int, keep: set[int] | None = None, plan: dict | None = None,
               seeds: dict[int, int] | None = None) -> dict:
    """Run ``fn`` over ``sets`` (already on device) as ``plan`` says (default: rotation); returns
    per-call times in us and the CPU copies of the outputs of the timed entries in ``keep``
    (indices into ``plan["timed"]``, which holds ``calls`` x ``rounds(device)`` entries).
    ``seeds``: {timed index: RNG seed set before that call, outside the timed region}."""
    cuda = device == "cuda"
    plan = plan or rotation_plan(len(sets), warmup, calls * rounds(device))
    if len(plan["timed"]) != calls * rounds(device):
        raise ValueError(f"the plan has {len(plan['timed'])} timed entries, expected {calls * rounds(device)}")
    stage = _Stager(sets)
    flush = torch.empty(int(l2_flush_mb * 2**20 // 4), dtype=torch.float32, device=device) if cuda and l2_flush_mb else None
    keep, seeds = keep or set(), seeds or {}
    with torch.no_grad():
        for e in plan["warmup"]:
            fn(*stage(e))
        if cuda:
            torch.cuda.synchronize()
        ev, wall, kept = [], [], {}
        if not cuda:
            return _time_cpu(fn, stage, plan["timed"], calls, keep, seeds)
        for i, e in enumerate(plan["timed"]):
            xs = stage(e)  # copy and scale are queued before the flush and the sync: not timed
            if i in seeds:
                torch.manual_seed(seeds[i])
            if flush is not None:
                flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            start.record()
            out = fn(*xs)
            end.record()
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            ev.append(start.elapsed_time(end) * 1e3)
            wall.append((t1 - t0) * 1e6)
            if i in keep:
                kept[i] = _cpu_copy(out)
    return {"event_us": ev, "wall_us": wall, "kept": kept}


def _time_cpu(fn: Callable, stage: _Stager, timed: list, calls: int, keep: set[int], seeds: dict) -> dict:
    """Host clock, one intra-op thread; each call's time is its fastest of ``CPU_ROUNDS``."""
    wall, kept = [float("inf")] * calls, {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for r in range(CPU_ROUNDS):
            for i in range(calls):
                g = r * calls + i
                xs = stage(timed[g])
                if g in seeds:
                    torch.manual_seed(seeds[g])
                t0 = time.perf_counter()
                out = fn(*xs)
                wall[i] = min(wall[i], (time.perf_counter() - t0) * 1e6)
                if g in keep:
                    kept[g] = _cpu_copy(out)
    finally:
        torch.set_num_threads(threads)
    return {"event_us": [], "wall_us": wall, "kept": kept}


def _cpu_copy(out: Any) -> list:
    return [o.detach().cpu().clone() if isinstance(o, torch.Tensor) else o for o in flatten(out)]
