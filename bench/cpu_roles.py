"""Where the host's CPU goes during a throughput run, by the role of each process (Linux /proc).

Session 18 (H100, 16 cores) found the cold 24-task batch bound by the host CPU (78 % busy on
average, at least 90 % busy for 55 % of the run) once the timing budget shortened the GPU's share;
/proc/stat says how busy, not who. This samples every process's user+system time every
``period`` s and charges each increase to a role: the compilers (host gcc, nvcc's stages), the
compiler wrappers, ninja, each kind of harness worker, inductor's compile workers, the bench
itself, and the rest. A process that ends between two samples loses its last interval (at most
``period`` of its CPU), so short-lived processes are slightly under-counted.
"""

from __future__ import annotations

import os
import threading
import time

GCC = {"cc1plus", "cc1", "g++", "gcc", "c++", "as", "ld", "ld.bfd", "ld.gold", "collect2", "lto1", "cpp"}
NVCC = {"nvcc", "cicc", "ptxas", "cudafe++", "fatbinary", "nvlink", "nvdisasm", "cuobjdump", "nvprune"}
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def role_of(comm: str, cmdline: list[str], me: int | None = None, pid: int | None = None) -> str:
    """The role a process plays in a harness run.

    >>> role_of("cc1plus", ["/usr/lib/gcc/x86_64-linux-gnu/13/cc1plus", "-quiet"])
    'gcc'
    >>> role_of("cicc", ["cicc", "--c++17"])
    'nvcc'
    >>> role_of("python3", ["/usr/bin/python3", "-m", "rewards.harness.worker", "profiler", "7"])
    'worker:profiler'
    >>> role_of("python3", ["python3", "-I", "-S", "/x/rewards/harness/buildspeed.py", "cxx", "-c", "a.cpp"])
    'compiler wrapper'
    >>> role_of("python3", ["python3", "-m", "torch._inductor.compile_worker", "--pickler=x"])
    'inductor compile'
    >>> role_of("python3", ["python3", "bench/harness_throughput.py"], me=10, pid=10)
    'bench (orchestrator)'
    >>> role_of("bash", ["bash", "-c", "true"])
    'other'
    """
    if me is not None and pid == me:
        return "bench (orchestrator)"
    if comm in GCC:
        return "gcc"
    if comm in NVCC:
        return "nvcc"
    if comm == "ninja":
        return "ninja"
    for i, a in enumerate(cmdline):
        if a == "rewards.harness.worker" and i + 1 < len(cmdline):
            return f"worker:{cmdline[i + 1]}"
        if a.endswith("rewards/harness/buildspeed.py"):
            return "compiler wrapper"
        if "torch._inductor.compile_worker" in a or "compile_worker/__main__.py" in a:
            return "inductor compile"
    if comm in ("ncu", "nvidia-smi"):
        return comm
    return "other"


def _read(pid: str) -> tuple[str, float] | None:
    """(comm, user+system seconds) of a live process, None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    r = s.rfind(")")  # comm may hold spaces and parentheses
    fields = s[r + 2:].split()
    return s[s.find("(") + 1:r], (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: str) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [x.decode(errors="replace") for x in f.read().split(b"\0") if x]
    except OSError:
        return []


class RoleSampler:
    """A thread charging every process's CPU increase to its role; ``within`` sums a window."""

    def __init__(self, period: float = 0.2):
        self.deltas: list[tuple[float, str, float]] = []  # (perf_counter, role, CPU seconds)
        self._last: dict[str, tuple[str, str, float]] = {}  # pid -> (comm, role, CPU s at the last sample)
        self._stop = threading.Event()
        if os.path.isdir("/proc/self"):
            self._sample()  # what ran before the sampler started is not charged
            self.deltas.clear()
            threading.Thread(target=self._loop, args=(period,), daemon=True).start()

    def _sample(self) -> None:
        now, me, seen = time.perf_counter(), os.getpid(), {}
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            got = _read(pid)
            if got is None:
                continue
            comm, cpu = got
            prev = self._last.get(pid)
            # new since the last sample (a reused pid too), or exec'd since (a fork's comm changes):
            # classified again; a new process is charged from 0
            role = prev[1] if prev is not None and prev[0] == comm else role_of(comm, _cmdline(pid), me, int(pid))
            before = prev[2] if prev is not None and cpu >= prev[2] else 0.0
            if cpu > before:
                self.deltas.append((now, role, cpu - before))
            seen[pid] = (comm, role, cpu)
        self._last = seen

    def _loop(self, period: float) -> None:
        while not self._stop.wait(period):
            self._sample()

    def stop(self) -> None:
        self._stop.set()

    def within(self, windows: list[tuple[float, float]]) -> dict[str, float]:
        """CPU seconds per role charged inside ``windows`` (each (a, b]), most first."""
        out: dict[str, float] = {}
        for t, role, s in list(self.deltas):
            if any(a < t <= b for a, b in windows):
                out[role] = out.get(role, 0.0) + s
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))
