"""The sandbox's parts without the harness: the launcher's view, kill by uid, sealing builds,
strict/best/off. Fast: each launch is one small Python process, no torch, no compiler."""

import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from rewards.harness import sandbox
from rewards.harness.config import HarnessConfig
from rewards.harness.sandbox import Policy, kill_uid, seal_builds

linux_root = pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0,
                                reason="a dedicated uid and the mount view need root on Linux")


def test_sandbox_key_is_checked():
    assert HarnessConfig.from_mapping({"sandbox": "strict"}).sandbox == "strict"
    assert HarnessConfig().sandbox == "best"
    with pytest.raises(ValueError, match="harness.sandbox must be"):
        HarnessConfig.from_mapping({"sandbox": "on"})


def test_off_changes_nothing(tmp_path):
    p = Policy("off", str(tmp_path))
    argv = [sys.executable, "-c", "pass"]
    assert not p.active and p.launch(argv, str(tmp_path)) == (argv, None, {})
    assert p.evidence["mounts"] == "none" and p.evidence["uid"] == "same"


def run_in(p: Policy, tmp_path, code: str, netns: bool = True) -> tuple[subprocess.CompletedProcess, int | None]:
    scratch = tmp_path / f"scratch-{time.monotonic_ns()}"
    scratch.mkdir()
    argv, uid, env = p.launch([sys.executable, "-c", code], str(scratch), netns)
    return subprocess.run(argv, cwd=scratch, capture_output=True, text=True, timeout=60, env={**os.environ, **env}), uid


VIEW = """
import json, os, socket
root = os.environ['KM_ROOT']; cache = os.environ['KM_CACHE']
out = {'uid': os.getuid(), 'cache': sorted(os.listdir(cache)), 'rewards': sorted(os.listdir(root + '/rewards')),
       'harness_ro': not os.access(root + '/rewards/harness', os.W_OK),
       'reward_py_seen': os.path.exists(root + '/rewards/reward.py'),
       'ifaces': [n for _, n in socket.if_nameindex()]}
open('mine.txt', 'w').write('scratch is writable')
for name, p in (('reward_py', root + '/rewards/reward.py'), ('baselines', cache + '/baselines/x.json')):
    try:
        open(p, 'a').close(); out[name] = 'writable'
    except OSError as e:
        out[name] = type(e).__name__
print(json.dumps(out))
"""


@linux_root
def test_launcher_view_hides_the_cache_and_the_tree_keeps_scratch(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "baselines").mkdir(parents=True)
    (cache / "baselines" / "t.json").write_text("{}")
    p = Policy("strict", str(cache))
    assert p.evidence["missing"] == []
    monkeypatch.setenv("KM_ROOT", sandbox._HARNESS_ROOT)
    monkeypatch.setenv("KM_CACHE", str(cache))
    r, uid = run_in(p, tmp_path, VIEW)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["uid"] == uid != 0
    assert out["cache"] == ["ext"]  # no baselines/ (this scratch lives outside the cache)
    assert out["rewards"] == ["__init__.py", "harness"] and out["harness_ro"]
    assert out["reward_py"] != "writable" and not out["reward_py_seen"] and out["baselines"] != "writable"
    assert out["ifaces"] == ["lo"]
    assert (cache / "baselines" / "t.json").read_text() == "{}"


def test_a_venv_inside_the_checkout_stays_visible_the_rest_of_it_does_not(tmp_path):
    p = Policy("off", str(tmp_path / "cache"))
    checkout = os.path.dirname(os.path.realpath(sys.prefix))  # as if the venv were <checkout>/.venv
    keep = p._keep(checkout)
    assert keep[os.path.realpath(sys.prefix)] == "ro" and keep[os.path.join(checkout, "rewards", "__init__.py")] == "empty"
    assert not any(checkout.startswith(k) for k in keep)  # neither the checkout nor a parent of it
    harness = {os.path.join(sandbox._HARNESS_ROOT, "rewards", x) for x in ("harness", "__init__.py")}
    mine = p._keep(sandbox._HARNESS_ROOT)  # this checkout: the harness, and a venv if it has one inside
    assert all(k in harness or k.startswith(os.path.realpath(sys.prefix))
               for k in mine if k.startswith(sandbox._HARNESS_ROOT + "/"))


@linux_root
def test_workers_start_when_the_venv_lives_in_the_hidden_checkout(tmp_path, monkeypatch):
    checkout = os.path.dirname(os.path.realpath(sys.prefix))
    monkeypatch.setattr(sandbox, "_HARNESS_ROOT", checkout)
    p = Policy("strict", str(tmp_path / "cache"))
    r, _ = run_in(p, tmp_path, f"import os; print(sorted(os.listdir({checkout!r})))")
    assert r.returncode == 0, r.stderr
    assert eval(r.stdout) == sorted({os.path.basename(os.path.realpath(sys.prefix)), "rewards"})


DAEMON = """
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', sys.argv[1]])
    os._exit(0)
"""


def _alive(tag: str) -> bool:
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and f"sleep\0{tag}".encode() in open(f"/proc/{p}/cmdline", "rb").read():
                return True
        except OSError:
            pass
    return False


@linux_root
def test_kill_by_uid_takes_a_daemon_and_spares_another_uid(tmp_path):
    p = Policy("best", str(tmp_path / "cache"))
    tags = [f"{time.time() % 1000:.3f}1", f"{time.time() % 1000:.3f}2"]
    uids = []
    for tag in tags:
        scratch = tmp_path / tag
        scratch.mkdir()
        argv, uid, _ = p.launch([sys.executable, "-c", DAEMON, tag], str(scratch))
        subprocess.run(argv, cwd=scratch, timeout=30, check=True)
        uids.append(uid)
    time.sleep(0.2)
    assert _alive(tags[0]) and _alive(tags[1])  # the double-forked daemons outlived their parent
    assert kill_uid(uids[0]) >= 1
    time.sleep(0.1)
    assert not _alive(tags[0]) and _alive(tags[1])
    kill_uid(uids[1])


@linux_root
def test_seal_makes_a_workers_builds_roots_and_drops_unfinished_ones(tmp_path):
    ext = tmp_path / "ext"
    done, half, other = ext / "k1", ext / "k2", ext / "k3"
    for d in (done, half, other):
        d.mkdir(parents=True)
        (d / "m.so").write_bytes(b"x")
        os.chmod(d / "m.so", 0o664)
    (done / ".km_done").touch()
    for d in (done, half):
        for n in (d, *d.iterdir()):
            os.lchown(n, 2_000_000_123, 2_000_000_000)
    os.lchown(other, 2_000_000_456, 2_000_000_000)
    seal_builds(str(ext), 2_000_000_123)
    st = os.stat(done / "m.so")
    assert (st.st_uid, st.st_mode & 0o022) == (0, 0) and os.stat(done).st_uid == 0
    assert not half.exists()
    assert os.stat(other).st_uid == 2_000_000_456  # another worker's, still building


def test_strict_refuses_and_best_warns_once_when_the_launcher_cannot_isolate(tmp_path, monkeypatch):
    bad = tmp_path / "launcher.py"
    bad.write_text("import sys; sys.exit('no namespaces here')")
    monkeypatch.setattr(sandbox, "_LAUNCHER", str(bad))
    monkeypatch.setattr(sandbox, "_WARNED", set())
    with pytest.raises(RuntimeError, match="harness.sandbox=strict: this machine cannot apply") as e:
        Policy("strict", str(tmp_path / "c"))
    assert "no namespaces here" in str(e.value)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        a, b = Policy("best", str(tmp_path / "c")), Policy("best", str(tmp_path / "c"))
    assert len([x for x in w if "harness.sandbox=best" in str(x.message)]) == 1
    assert not a.active and a.evidence["missing"] and b.evidence["mounts"] == "none"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces")
def test_as_an_ordinary_user_with_user_namespaces(tmp_path):
    """The fallback without root: the same view inside a user namespace (run as nobody)."""
    if os.geteuid() != 0:
        user = None
    else:
        user = 65534
        if _python_for(user, (sys.executable,)) is None:
            pytest.skip("this Python is not readable by an unprivileged user (installed under /root)")
    os.chmod(tmp_path, 0o777)
    code = ("import os, warnings; warnings.simplefilter('ignore')\n"
            "from rewards.harness.sandbox import Policy\n"
            f"p = Policy('best', {str(tmp_path / 'c')!r}); print(p.evidence)")
    r = subprocess.run([sys.executable, "-c", code], user=user, group=user, capture_output=True, text=True,
                       cwd=sandbox._HARNESS_ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "'uid': 'same'" in r.stdout and "'reap': 'session'" in r.stdout
    if "'userns': False" in r.stdout:
        pytest.skip(f"this kernel refuses unprivileged user namespaces: {r.stdout.strip()}")
    assert "'mounts': 'ro+tmpfs'" in r.stdout


_ISOLATION_ATTACK = r"""
import os, socket, sys
cache, port, out = sys.argv[1], int(sys.argv[2]), {}
def t(name, fn):
    try:
        fn()
        out[name] = "ok"
    except Exception as e:
        out[name] = type(e).__name__
t("read_baseline", lambda: open(cache + "/baselines/b.json").read())
t("write_baseline", lambda: open(cache + "/baselines/b.json", "a").write(""))
t("connect", lambda: socket.create_connection(("127.0.0.1", port), timeout=2).close())
t("write_scratch", lambda: open("ok.txt", "w").write("1"))
print(repr(out))
"""


def _python_for(uid: int, exes: tuple = (sys.executable, "/usr/bin/python3", "/usr/local/bin/python3")) -> str | None:
    """The first of ``exes`` an unprivileged uid can run (this venv's may live under /root)."""
    for exe in exes:
        try:
            if os.path.exists(exe) and subprocess.run([exe, "-c", "pass"], user=uid, group=uid,
                                                      capture_output=True, timeout=30).returncode == 0:
                return exe
        except (OSError, subprocess.SubprocessError):
            continue
    return None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux namespaces")
def test_the_launcher_isolates_an_ordinary_user():
    """The non-root path of the sandbox (issue 16: the attack suite needs the harness, whose torch
    this user may not reach): the launcher alone, run as nobody, in an unprivileged user namespace.
    Inside, the hidden cache cannot be read or written and the orchestrator's socket cannot be
    reached; the same program without the launcher (the control) does all three."""
    if os.geteuid() != 0:
        pytest.skip("needs root to act as another, unprivileged user")
    import marshal
    import shutil
    import socket
    import tempfile

    nobody = 65534
    exe = _python_for(nobody)
    if exe is None:
        pytest.skip("no Python here that an unprivileged user can run")
    # outside /tmp (the view replaces /tmp anyway): the cache must be hidden by the hide list itself
    parent = next((d for d in ("/mnt", "/srv", "/opt") if os.path.isdir(d) and os.access(d, os.W_OK)), None)
    base = tempfile.mkdtemp(prefix="km-iso-", dir=parent)
    srv = socket.socket()
    try:
        os.chmod(base, 0o755)
        cache, scratch = os.path.join(base, "cache"), os.path.join(base, "cache", "scratch", "w")
        os.makedirs(os.path.join(cache, "baselines"))
        os.makedirs(scratch)
        with open(os.path.join(cache, "baselines", "b.json"), "w") as f:
            f.write('{"ref_runtime_us": 5}')
        os.chmod(os.path.join(cache, "baselines"), 0o777)  # the control can write it: the view must stop that
        os.chmod(os.path.join(cache, "baselines", "b.json"), 0o666)
        os.chown(scratch, nobody, nobody)
        with open(os.path.join(scratch, "attack.py"), "w") as f:
            f.write(_ISOLATION_ATTACK)
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        spec = {"want": ["mounts", "net"], "hide": [cache], "keep": {scratch: "rw"},
                "tmp": ["/tmp", "/var/tmp", "/dev/shm"], "uid": None, "gid": None, "cwd": scratch}
        run = lambda argv: subprocess.run(argv, user=nobody, group=nobody, capture_output=True, text=True,  # noqa: E731
                                          cwd=scratch, timeout=60)
        probe = run([exe, "-I", "-S", sandbox._LAUNCHER, marshal.dumps({**spec, "check_hidden": [os.path.join(cache, "baselines")]}).hex(), "--probe"])
        got = marshal.loads(bytes.fromhex(probe.stdout.strip())) if probe.returncode == 0 and probe.stdout.strip() else {}
        if not got.get("userns"):
            pytest.skip(f"this kernel refuses unprivileged user namespaces: {got or probe.stderr[-300:]}")
        assert got["mounts"] == "ro+tmpfs" and got["hidden"] and got["net"] == "netns" and got["ids"] == [nobody, nobody]
        attack = [exe, "-I", "-S", "attack.py", cache, str(srv.getsockname()[1])]
        inside = run([exe, "-I", "-S", sandbox._LAUNCHER, marshal.dumps(spec).hex(), "--", *attack])
        control = run(attack)
        assert inside.returncode == 0 and control.returncode == 0, (inside.stderr, control.stderr)
        assert control.stdout.strip() == repr({"read_baseline": "ok", "write_baseline": "ok", "connect": "ok",
                                               "write_scratch": "ok"})
        res = eval(inside.stdout.strip())  # noqa: S307 - our own script's repr of a dict of names
        assert res["write_scratch"] == "ok" and res["connect"] != "ok", res
        assert res["read_baseline"] != "ok" and res["write_baseline"] != "ok", res
    finally:
        srv.close()
        shutil.rmtree(base, ignore_errors=True)
