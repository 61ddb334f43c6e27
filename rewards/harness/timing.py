"""Timed calls: rotated input sets, L2 flush, CUDA events and host wall clock per call.

Each call: flush L2 (write ``l2_flush_mb``), synchronize the device, start the host clock,
record the start event, call, record the end event, synchronize the device (all streams),
stop the host clock. Events see the current stream only; the host clock over a device-wide
sync sees everything, so work hidden on side streams shows up as a wall/event disagreement.

On CPU the host clock is all there is, and on a shared machine a call that loses its core to
another process takes a whole scheduler slice longer, and a multi-threaded op waits at its
barrier for whichever of its threads lost its core (measured on 2 shared cores: a 150 us
reference timed at 84 ms, a 235x "speedup" for an identical candidate). So on CPU: one
intra-op thread while timing (reference and candidate alike), and the calls run in
``CPU_ROUNDS`` rounds, each call's time being its fastest round, since interference only ever
adds time. Within a round the input sets rotate as on GPU; call i always sees set i mod n.
A candidate that raises its own thread count inside forward is not prevented from doing so.
"""

from __future__ import annotations

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


def time_calls(fn: Callable, sets: list[list], device: str, warmup: int, calls: int,
               l2_flush_mb: int, keep: set[int] | None = None) -> dict:
    """Run ``fn`` over rotated ``sets`` (already on device); returns per-call times in us and
    the CPU copies of the outputs of the calls listed in ``keep`` (for spot checks)."""
    cuda = device == "cuda"
    flush = torch.empty(int(l2_flush_mb * 2**20 // 4), dtype=torch.float32, device=device) if cuda and l2_flush_mb else None
    keep = keep or set()
    with torch.no_grad():
        for i in range(warmup):
            fn(*sets[i % len(sets)])
        if cuda:
            torch.cuda.synchronize()
        ev, wall, kept = [], [], {}
        if not cuda:
            return _time_cpu(fn, sets, calls, keep)
        for i in range(calls):
            xs = sets[i % len(sets)]
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


def _time_cpu(fn: Callable, sets: list[list], calls: int, keep: set[int]) -> dict:
    """Host clock, one intra-op thread; each call's time is its fastest of ``CPU_ROUNDS``."""
    wall, kept = [float("inf")] * calls, {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(CPU_ROUNDS):
            for i in range(calls):
                t0 = time.perf_counter()
                out = fn(*sets[i % len(sets)])
                wall[i] = min(wall[i], (time.perf_counter() - t0) * 1e6)
                if i in keep:
                    kept[i] = _cpu_copy(out)
    finally:
        torch.set_num_threads(threads)
    return {"event_us": [], "wall_us": wall, "kept": kept}


def _cpu_copy(out: Any) -> list:
    return [o.detach().cpu().clone() if isinstance(o, torch.Tensor) else o for o in flatten(out)]


def spot_indices(calls: int, n_sets: int, n: int) -> list[int]:
    """The last ``n`` timed calls (so caching warmed up by earlier calls is exercised)."""
    return list(range(max(0, calls - n), calls))
