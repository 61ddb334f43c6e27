"""Start and kill worker processes with a scratch cwd, a scrubbed environment and no network.

What the sandbox does: the candidate runs in a fresh interpreter (spawned, never forked from
the orchestrator) in its own session, so a kill takes its compiler and helper children too;
its cwd is a fresh scratch directory; variables whose names contain KEY, TOKEN, SECRET,
PASSWORD or CREDENTIAL are absent from its environment from exec on (so /proc/self/environ
is clean too); core dumps are off; as root on Linux it enters a new, empty network namespace
(no interfaces but a down loopback). Messages back are read with weights_only unpickling.

What it does not stop: reading or writing any file the user can (the file system is shared,
including the build cache and the task files), reading the orchestrator's memory through
/proc/<pid>/mem where ptrace is unrestricted (no Yama or kernel.yama.ptrace_scope 0) or the
workers run as root (the reference outputs live there: run as an unprivileged user under
Yama), using lots of memory, CPU or GPU time up to the phase timeout, network access when not
root, or lying about anything measured inside its own process (timer values, alias and
mutation checks): those are cross-checked where the parent can (outputs are compared in the
parent, host wall time against CUDA events, kernels by the profiler), not prevented. Use a container or VM for hostile code at scale.
"""

from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection

_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)
_HARNESS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scrubbed_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
    env["PYTHONPATH"] = os.pathsep.join([_HARNESS_ROOT, *env.get("PYTHONPATH", "").split(os.pathsep)]).rstrip(os.pathsep)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def enter_network_namespace() -> str:
    """Called first thing in a worker; returns what happened (for the log)."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "network namespace skipped (not root on Linux)"
    try:
        if hasattr(os, "unshare"):
            os.unshare(os.CLONE_NEWNET)
        else:  # Python 3.11
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(0x40000000) != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        return "network namespace entered"
    except OSError as e:
        return f"network namespace failed ({e})"


def _child_setup() -> None:
    """In the child before exec: no core dumps; on Linux, die with the orchestrator (SIGKILL
    when the thread that spawned it exits), so a killed run leaves no worker on the GPU."""
    import resource

    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _kill_session(sid: int) -> None:
    """SIGKILL every process of session ``sid`` (the worker is its leader), Linux /proc only."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid:  # after "pid (comm)": state ppid pgrp session ...
                os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            continue


class Worker:
    """One worker process and its message connection (a socketpair, not stdout)."""

    def __init__(self, role: str, env_extra: dict | None = None, scratch_root: str | None = None,
                 netns: bool = True):
        os.makedirs(scratch_root or tempfile.gettempdir(), exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix=f"km-{role}-", dir=scratch_root)
        parent, child = socket.socketpair()
        self.log_path = os.path.join(self.scratch, "worker.log")
        log = open(self.log_path, "wb")
        extra = dict(env_extra or {}, KM_NETNS="1" if netns else "0", HOME=self.scratch)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewards.harness.worker", role, str(child.fileno())],
            cwd=self.scratch, env=scrubbed_env(extra), stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, pass_fds=(child.fileno(),), start_new_session=True,
            preexec_fn=_child_setup)
        log.close()
        child.close()
        self.conn = Connection(parent.detach())

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - n))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def exit_reason(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "worker still running"
        if rc < 0:
            try:
                return f"worker killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"worker killed by signal {-rc}"
        return f"worker exited with code {rc}"

    def kill_process(self) -> None:
        """SIGKILL the worker's process group, leaving the connection open (safe from another
        thread: a reader blocked on it gets EOF)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()

    def kill(self) -> None:
        self.kill_process()
        _kill_session(self.proc.pid)  # ninja puts each compiler in its own process group
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        try:
            self.conn.close()
        except OSError:
            pass

    def cleanup(self) -> None:
        import shutil

        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
