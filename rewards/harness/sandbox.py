"""Start and kill worker processes: scratch cwd, scrubbed environment, isolation (isolation.py).

What every worker gets: a fresh interpreter (spawned, never forked from the orchestrator) in its
own session; a fresh scratch directory as cwd; an environment without variables whose names
contain KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL (so /proc/self/environ is clean too); no core
dumps. Messages back are read with weights_only unpickling.

What the ``Policy`` adds to the processes that run candidate code (``harness.sandbox``: best by
default, strict refuses to run without all of it, off): a uid of their own (root only), a private
mount view where the cache, the project tree, home directories and ``harness.sandbox_hide`` are
empty and read-only except the worker's scratch and the build cache (see isolation.py), an empty
network namespace, an orchestrator that is not dumpable (PR_SET_DUMPABLE 0: no /proc/<pid>/mem or
environ for a process of the same uid), and, at the end, every process of the worker's uid killed
(double forks and setsid included) and its new build directories sealed (owned by root).

What it does not stop: see README, "The sandbox" (memory, CPU and GPU time up to the phase timeout,
lying about anything measured inside its own process, planting a build for a key another program
will use, kernel exploits). Use a container or VM for hostile code at scale.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
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


_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "isolation.py")
_FULL = {"uid": "dedicated", "mounts": "ro+tmpfs", "net": "netns", "dumpable": False, "reap": "uid"}
_WARNED: set[str] = set()


def set_undumpable() -> bool:
    """PR_SET_DUMPABLE 0 on this process: a process of the same uid cannot ptrace it nor read its
    /proc/<pid>/mem or environ (non-root orchestrators; as root the workers' uid differs anyway)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _counters_admin_only() -> bool:
    """The NVIDIA driver's NVreg_RestrictProfilingToAdminUsers (ncu as a user fails with ERR_NVGPUCTRPERM)."""
    try:
        with open("/proc/driver/nvidia/params") as f:
            return "RmProfilingAdminOnly: 1" in f.read()
    except OSError:
        return False


def _in(p: str, d: str) -> bool:
    return p == d or p.startswith(d.rstrip("/") + "/")


class Policy:
    """What isolation this machine gives workers that run candidate code (probed once), each
    worker's launcher spec, and the clean-up after it (kill by uid, seal its builds)."""

    def __init__(self, mode: str, cache: str, hide: list | tuple = (), uids: list | tuple = (2_000_000_000, 1_000_000),
                 netns: bool = True, ncu_uid: bool = True, read_only: list | tuple = ()):
        if mode not in ("strict", "best", "off"):
            raise ValueError(f"harness.sandbox must be strict, best or off, not {mode!r}")
        self.mode, self.cache, self.netns, self.ncu_uid = mode, os.path.abspath(cache), netns, ncu_uid
        self.ext = os.path.join(self.cache, "ext")
        self.uid_base, self.uid_span = int(uids[0]), max(1, int(uids[1]))
        self.gid = self.uid_base  # one group for all workers: a key built by two at once stays writable to both
        self._next, self._lock = 0, threading.Lock()
        root_dir = _HARNESS_ROOT
        self.hide = [self.cache, root_dir, os.path.expanduser("~"), "/root", "/home",
                     *[os.path.abspath(os.path.expanduser(h)) for h in hide]]
        # orchestrator-written parts of the cache workers may read (the sealed PCHs)
        self.keep = {**self._keep(root_dir), **{os.path.abspath(p): "ro" for p in read_only}}
        self.applied: dict = {}
        self.want: tuple = ()
        if mode != "off":
            self.dumpable = not set_undumpable()
            self._probe()
        else:
            self.dumpable = True
        # ncu reads performance counters: as another uid only where the driver lets users do so
        self.ncu_as_user = ncu_uid and not _counters_admin_only()
        self.evidence = self._evidence()
        if self.active:
            self.evidence["ncu"] = "dedicated uid" if self.ncu_as_user and "uid" in self.want else "root in the view"
        missing = sorted(k for k, v in _FULL.items() if self.evidence.get(k) != v and not (k == "net" and not netns))
        self.evidence["missing"] = missing
        if mode == "strict" and missing:
            raise RuntimeError(f"harness.sandbox=strict: this machine cannot apply {missing} "
                               f"({self.applied.get('error') or 'not root and no user namespaces'}); "
                               "run as root, allow user namespaces, or set harness.sandbox=best")
        if mode == "best" and missing and (key := ",".join(missing)) not in _WARNED:
            _WARNED.add(key)
            warnings.warn(f"harness.sandbox=best: candidate processes run without {missing} on this machine "
                          f"({self.applied.get('error') or 'not root'}); see the README's sandbox section", RuntimeWarning, stacklevel=2)

    @property
    def active(self) -> bool:
        return bool(self.want)

    @property
    def guards_cache(self) -> bool:
        """Workers cannot write what the orchestrator keeps in the cache (another uid or a
        read-only view): what it shares with every build (the PCHs) may then be shared."""
        return "uid" in self.want or "mounts" in self.want

    def _keep(self, root_dir: str) -> dict:
        real = lambda ps: {os.path.realpath(p) for p in ps if p and os.path.isabs(p) and os.path.exists(p)}  # noqa: E731
        prefixes = real({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
                         os.path.dirname(os.path.dirname(sys.executable)),
                         os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))})
        other = real([*sys.path, *os.environ.get("PATH", "").split(os.pathsep),
                      *(os.environ.get(k, "") for k in ("CUDA_HOME", "CUDA_PATH"))])
        # the project tree only through the harness package (under an empty rewards/__init__.py)
        # and a Python installed inside it (a .venv in the checkout)
        ro = {p for p in prefixes if not _in(root_dir, p)}
        ro |= {p for p in other if not _in(root_dir, p) and (not _in(p, root_dir) or any(_in(p, q) for q in ro))}
        keep = {p: "ro" for p in ro if not _in(p, self.cache)}
        keep[os.path.join(root_dir, "rewards", "harness")] = "ro"
        keep[os.path.join(root_dir, "rewards", "__init__.py")] = "empty"
        keep[self.ext] = "rw"
        return keep

    def _spec(self, scratch: str, uid: int | None, want: tuple, loopback: bool = False) -> dict:
        keep = {**self.keep, os.path.realpath(scratch): "rw"}
        return {"want": list(want), "hide": self.hide, "keep": keep, "tmp": ["/tmp", "/var/tmp", "/dev/shm"],
                "uid": uid, "gid": self.gid, "cwd": scratch, "loopback": loopback}

    def _uid(self) -> int:
        with self._lock:
            self._next += 1
            return self.uid_base + 1 + (os.getpid() * 4099 + self._next) % (self.uid_span - 1)

    def _ensure_ext(self) -> None:
        os.makedirs(self.ext, exist_ok=True)
        if os.geteuid() == 0:  # workers may add a build directory, not list or rename others'
            os.chown(self.ext, 0, 0)
            os.chmod(self.ext, 0o1733)

    def _probe(self) -> None:
        want = ["mounts", "uid"] + (["net"] if self.netns else [])
        self._ensure_ext()
        scratch = tempfile.mkdtemp(prefix="km-probe-", dir=self._scratch_root())
        uid = self._uid() if os.geteuid() == 0 else None
        spec = self._spec(scratch, uid, tuple(want))
        spec["check_hidden"] = [os.path.join(_HARNESS_ROOT, "rewards", "reward.py"), os.path.join(self.cache, "baselines")]
        try:
            if uid is not None:
                os.chown(scratch, uid, self.gid)
            p = subprocess.run([sys.executable, "-I", "-S", _LAUNCHER, marshal.dumps(spec).hex(), "--probe"], cwd=scratch,
                               capture_output=True, text=True, timeout=60, preexec_fn=_child_setup)
            got = marshal.loads(bytes.fromhex(p.stdout.strip().splitlines()[-1])) if p.returncode == 0 and p.stdout.strip() else \
                {"error": (p.stderr.strip().splitlines() or ["the probe failed"])[-1][:200]}
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            got = {"error": str(e)[:200]}
        finally:
            import shutil

            shutil.rmtree(scratch, ignore_errors=True)
        if got.get("uid") and not got.get("gpu_nodes", True):
            got.pop("uid")
            got["error"] = "the GPU device nodes refuse another uid (make /dev/nvidia* mode 0666)"
        if got.get("mounts") and not got.get("hidden"):
            got.pop("mounts")
            got["error"] = "the mount view did not hide the cache"
        self.applied = got
        self.want = tuple(k for k in ("mounts", "net") if got.get(k)) + (("uid",) if got.get("uid") else ())

    def _scratch_root(self) -> str:
        d = os.path.join(self.cache, "scratch")
        os.makedirs(d, exist_ok=True)
        return d

    def _evidence(self) -> dict:
        a = self.applied
        uid = bool(a.get("uid"))
        return {"mode": self.mode, "uid": "dedicated" if uid else "same",
                "mounts": a.get("mounts") or "none", "net": "netns" if a.get("net") else "shared",
                "dumpable": self.dumpable, "reap": "uid" if uid else "session",
                "no_new_privs": bool(a.get("no_new_privs")), "userns": bool(a.get("userns"))}

    def launch(self, argv: list[str], scratch: str, netns: bool = True, loopback: bool = False,
               ncu: bool = False) -> tuple[list[str], int | None, dict]:
        """The launcher command for ``argv``, the worker's uid (None: the orchestrator's), and env."""
        if not self.active:
            return argv, None, {}
        want = tuple(w for w in self.want if w != "net" or netns)
        if ncu and not self.ncu_as_user:
            want = tuple(w for w in want if w != "uid")
        uid = self._uid() if "uid" in want else None
        self._ensure_ext()
        if uid is not None:
            for d, _, files in os.walk(scratch):
                for n in [d, *(os.path.join(d, f) for f in files)]:
                    os.lchown(n, uid, self.gid)
        env = {"KM_NET_DONE": "network namespace entered (sandbox)"} if "net" in want else {}
        if uid is not None:  # no passwd entry: getpass.getuser() (torch's compile caches) reads these
            env.update(USER=f"km-sandbox-{uid}", LOGNAME=f"km-sandbox-{uid}")
        return [sys.executable, "-I", "-S", _LAUNCHER, marshal.dumps(self._spec(scratch, uid, want, loopback)).hex(), "--",
                *argv], uid, env

    def finish(self, uid: int | None) -> None:
        """Kill every process of ``uid`` (what a candidate daemonized), then seal its builds."""
        if uid is None:
            return
        kill_uid(uid)
        seal_builds(self.ext, uid)


def kill_uid(uid: int, rounds: int = 50) -> int:
    """SIGKILL every process whose real uid is ``uid`` until none is left (forks between two
    scans are caught by the next); returns how many were killed."""
    n = 0
    for _ in range(rounds):
        found = []
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open(f"/proc/{p}/status") as f:
                    st = dict(line.split(":", 1) for line in f if line.startswith(("State:", "Uid:")))
                if int(st["Uid"].split()[0]) == uid and not st["State"].strip().startswith(("Z", "X")):
                    found.append(int(p))  # a zombie is dead already: its parent reaps it
            except (OSError, ValueError, IndexError, KeyError):
                continue
        if not found:
            return n
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                n += 1
            except OSError:
                pass
        time.sleep(0.002)
    return n


def seal_builds(ext: str, uid: int) -> None:
    """Build directories ``uid`` made: finished or failed ones become root's and read-only to
    workers; an unfinished one (killed mid-build) is removed."""
    import shutil

    try:
        entries = list(os.scandir(ext))
    except OSError:
        return
    for e in entries:
        try:
            if e.stat(follow_symlinks=False).st_uid != uid:
                continue
            names = set(os.listdir(e.path)) if e.is_dir(follow_symlinks=False) else set()
            if not names & {".km_done", ".km_failed"}:
                shutil.rmtree(e.path) if e.is_dir(follow_symlinks=False) else os.remove(e.path)
                continue
            for d, dirs, files in os.walk(e.path):
                for n in [d, *(os.path.join(d, f) for f in files + dirs)]:
                    os.lchown(n, 0, 0)
                    if not os.path.islink(n):
                        os.chmod(n, os.lstat(n).st_mode & 0o7755)
        except OSError:
            continue


class Worker:
    """One worker process and its message connection (a socketpair, not stdout)."""

    def __init__(self, role: str, env_extra: dict | None = None, scratch_root: str | None = None,
                 netns: bool = True, sandbox: Policy | None = None):
        os.makedirs(scratch_root or tempfile.gettempdir(), exist_ok=True)
        self.scratch = tempfile.mkdtemp(prefix=f"km-{role}-", dir=scratch_root)
        parent, child = socket.socketpair()
        self.log_path = os.path.join(self.scratch, "worker.log")
        log = open(self.log_path, "wb")
        extra = dict(env_extra or {}, KM_NETNS="1" if netns else "0", HOME=self.scratch)
        argv = [sys.executable, "-m", "rewards.harness.worker", role, str(child.fileno())]
        self.sandbox, self.uid = sandbox, None
        if sandbox is not None:
            argv, self.uid, more = sandbox.launch(argv, self.scratch, netns)
            extra.update(more)
        self.proc = subprocess.Popen(
            argv,
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
        if self.sandbox is not None:
            self.sandbox.finish(self.uid)  # what escaped the session (setsid, double fork)
        try:
            self.conn.close()
        except OSError:
            pass

    def cleanup(self) -> None:
        import shutil

        self.kill()
        shutil.rmtree(self.scratch, ignore_errors=True)
