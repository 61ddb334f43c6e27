"""The launcher that isolates every process running candidate code (build, candidate, profiler
workers; ncu): ``python -I -S isolation.py SPEC -- ARGV...`` (stdlib only; SPEC is a hex marshal of
a dict that ``sandbox.Policy`` writes) enters new namespaces, rebuilds the file-system view,
drops to the worker's own uid and execs ARGV. ``--probe`` instead of ``--`` tries the same and
prints what applied (the Policy probes once per evaluator).

The view (root, or an unprivileged user namespace): a private mount namespace where the cache root,
the project tree, ``~``, /root, /home and ``harness.sandbox_hide`` are empty read-only tmpfs, with
only what the worker needs bound back: the Python install (read-only), the harness package under
an empty ``rewards/__init__.py`` (read-only: importing the harness runs none of the reward code),
the worker's scratch and the build cache ``ext/`` (writable, subject to permissions); /tmp,
/var/tmp and /dev/shm are fresh tmpfs. As root the worker runs as a uid of its own
(``harness.sandbox_uids``, no passwd entry needed) in the shared sandbox group, with no_new_privs:
it can create a new build directory in ``ext/`` (mode 1733: no listing, no renaming others'
entries) but not write into a sealed one; a build directory it made is chowned to root when it
ends. /dev (the GPU nodes) is untouched.
"""

from __future__ import annotations

import ctypes
import marshal
import os
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_ST_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC)) if hasattr(os, "ST_NOSUID") else ()
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
EXIT_SETUP = 121  # the launcher could not apply its spec (message on stderr: the worker log)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")


def _mount(src: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _carried(path: str) -> int:
    """Flags a read-only remount of a bind must keep (a user namespace may not drop them)."""
    f = os.statvfs(path).f_flag
    return sum(ms for st, ms in _ST_FLAGS if f & st)


def _hide(d: str, keep: dict[str, str], scratch: bool = False) -> None:
    """Empty read-only tmpfs over ``d`` (``scratch``: a writable one, as /tmp); each kept path
    under it bound back (ro, rw) or, for ``empty``, an empty file. Children are opened before the
    tmpfs covers them."""
    inside = {p: m for p, m in keep.items() if p.startswith(d.rstrip("/") + "/")}
    kids: dict[str, dict[str, str]] = {}
    for p, m in inside.items():
        kids.setdefault(p[len(d.rstrip("/")) + 1:].split("/")[0], {})[p] = m
    fds, dfd = {}, os.open(d, os.O_PATH | os.O_DIRECTORY)
    for name in kids:
        try:
            fds[name] = os.open(name, os.O_PATH, dir_fd=dfd)
        except OSError:
            pass
    os.close(dfd)
    _mount("tmpfs", d, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" if scratch else "mode=755,size=4m")
    for name, items in sorted(kids.items()):
        target = os.path.join(d, name)
        mode = items.get(target)
        if mode == "empty":
            open(target, "w").close()
            continue
        if name not in fds:
            continue
        src = f"/proc/self/fd/{fds[name]}"
        if os.path.isdir(src):
            os.mkdir(target)
        else:
            open(target, "w").close()
        _mount(src, target, None, MS_BIND | MS_REC)
        if mode is None:  # an ancestor of what is kept: hide the rest of it too
            _hide(target, items)
        elif mode == "ro":
            _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _carried(target))
    for fd in fds.values():
        os.close(fd)
    if not scratch:
        _mount(None, d, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=755")


def _loopback_up() -> None:
    """ncu talks to its target over loopback: bring ``lo`` up in the new, otherwise empty netns."""
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", 0x1 | 0x8 | 0x40))  # SIOCSIFFLAGS UP|LOOPBACK|RUNNING


def _userns(uid: int, gid: int) -> None:
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def apply(spec: dict, probe: bool = False) -> dict:
    """Apply ``spec`` to this process; returns what applied. Not probing, a failure raises."""
    got: dict = {}
    root = os.geteuid() == 0
    want = spec.get("want", WANT_ALL)
    flags = 0
    if "mounts" in want or "net" in want:
        flags = (CLONE_NEWNS if "mounts" in want else 0) | (CLONE_NEWNET if "net" in want else 0)
        if not root:
            flags |= CLONE_NEWUSER
    uid, gid = os.getuid(), os.getgid()
    try:
        if flags:
            _check(_libc.unshare(flags), "unshare")
            if not root:
                _userns(uid, gid)
                got["userns"] = True
        if "net" in want:
            if spec.get("loopback"):
                _loopback_up()
            got["net"] = "netns+lo" if spec.get("loopback") else "netns"
        if "mounts" in want:
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            keep = {os.path.realpath(p): m for p, m in spec["keep"].items()}
            tmp = {os.path.realpath(p) for p in spec.get("tmp", []) if os.path.isdir(p)}
            roots = sorted(tmp | {os.path.realpath(p) for p in spec["hide"] if os.path.isdir(p)}, key=len)
            for d in [h for h in roots if not any(h.startswith(o.rstrip("/") + "/") for o in roots)]:
                _hide(d, keep, scratch=d in tmp)
            got["mounts"] = "ro+tmpfs"
        if "uid" in want and root:
            os.setgroups([])
            os.setresgid(spec["gid"], spec["gid"], spec["gid"])
            os.setresuid(spec["uid"], spec["uid"], spec["uid"])
            got["uid"] = str(spec["uid"])
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        got["no_new_privs"] = True
    except OSError as e:
        if not probe:
            raise
        got["error"] = str(e)
    # the death signal is cleared by a change of credentials: set it again for the exec'd worker
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.umask(0o002)  # builds in ext/ are group-shared until sealed (same key built twice at once)
    if spec.get("cwd"):
        os.chdir(spec["cwd"])
    return got


WANT_ALL = ("mounts", "net", "uid")


def main(argv: list[str]) -> None:
    spec = marshal.loads(bytes.fromhex(argv[1]))  # marshal, not json: json's import is a third of the start-up
    if argv[2] == "--probe":
        got = apply(spec, probe=True)
        if got.get("mounts"):  # the view really hides what it should
            got["hidden"] = not any(os.path.exists(p) for p in spec.get("check_hidden", []))
        got["ids"] = [os.getuid(), os.getgid()]
        nodes = [os.path.join("/dev", n) for n in os.listdir("/dev") if n.startswith("nvidia") and n[6:7] != "-" or n == "nvidia-uvm"]
        got["gpu_nodes"] = all(os.access(n, os.R_OK | os.W_OK) for n in nodes)  # the GPU stays usable
        print(marshal.dumps(got).hex())
        return
    try:
        apply(spec)
    except OSError as e:
        print(f"sandbox: cannot apply {sorted(spec.get('want', []))}: {e}", file=sys.stderr, flush=True)
        os._exit(EXIT_SETUP)
    if os.getppid() == 1:  # the orchestrator died while we set up
        os._exit(EXIT_SETUP)
    args = argv[3:]
    os.execv(args[0], args)


if __name__ == "__main__":
    main(sys.argv)
