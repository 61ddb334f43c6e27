"""What the sandbox costs per worker: spawn, hello (torch imported), clean-up, off vs best.

    python bench/sandbox_cost.py --n 8

A candidate costs one build worker and one candidate worker (on CUDA, one profiler worker too),
each started, greeted and dropped once, so the difference per spawn times three is the sandbox's
cost per candidate. Prints ms per spawn for each mode and the ratio; divide the difference by the
time one candidate takes (bench/harness_throughput.py) for its share of candidates per minute.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rewards.harness import protocol  # noqa: E402
from rewards.harness.sandbox import Policy, Worker  # noqa: E402


def one(policy: Policy | None, cache: str) -> tuple[float, float]:
    """(seconds to a hello, seconds to clean up) for one candidate worker."""
    t0 = time.perf_counter()
    w = Worker("candidate", {"KM_DEVICE": "cpu"}, os.path.join(cache, "scratch"), True, policy)
    hello = protocol.recv(w.conn)
    assert hello["role"] == "candidate", hello
    t1 = time.perf_counter()
    w.cleanup()
    return t1 - t0, time.perf_counter() - t1


def launcher_only(policy: Policy, cache: str, n: int) -> tuple[float, float, float]:
    """Medians (s): the launcher running /bin/true, a bare ``python -I -S``, and the clean-up
    (kill by uid, seal): the sandbox's own cost, without torch's import noise."""
    import subprocess

    xs = []
    for _ in range(n):
        s = tempfile.mkdtemp(dir=os.path.join(cache, "scratch"))
        argv, uid, _ = policy.launch(["/bin/true"], s)
        t0 = time.perf_counter()
        subprocess.run(argv, cwd=s, check=True)
        t1 = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True)
        t2 = time.perf_counter()
        policy.finish(uid)
        xs.append((t1 - t0, t2 - t1, time.perf_counter() - t2))
    return tuple(statistics.median(x[i] for x in xs) for i in range(3))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8)
    args = ap.parse_args()
    cache = tempfile.mkdtemp(prefix="km-sandbox-bench-")
    t0 = time.perf_counter()
    best = Policy("best", cache)
    probe_s = time.perf_counter() - t0
    print(f"probe: {probe_s * 1e3:.1f} ms once per evaluator; sandbox: {best.evidence}")
    la, bare, fin = launcher_only(best, cache, 3 * args.n)
    print(f"launcher {la * 1e3:.1f} ms (a bare interpreter {bare * 1e3:.1f} ms), clean-up {fin * 1e3:.1f} ms")
    res = {}
    for name, pol in (("off", None), ("best", best)) * 2:  # interleaved: the machine's load drifts
        for _ in range(args.n):
            res.setdefault(name, []).append(one(pol, cache))
    for name, xs in res.items():
        up, down = statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)
        print(f"{name:>4}: spawn to hello {up * 1e3:7.1f} ms, clean-up {down * 1e3:6.1f} ms (median of {len(xs)})")
    tot = {k: statistics.median(a + b for a, b in v) for k, v in res.items()}
    print(f"ratio best/off: {tot['best'] / tot['off']:.3f}; extra per worker {(tot['best'] - tot['off']) * 1e3:.1f} ms, "
          f"per candidate (3 workers) {(tot['best'] - tot['off']) * 3e3:.1f} ms")


if __name__ == "__main__":
    main()
