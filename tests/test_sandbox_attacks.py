"""Attacks on the harness from inside a candidate (issue 16), on CPU with the real harness.

One attack per test. An attack that gets through makes its candidate raise "ATTACK SUCCEEDED"
(or, for the destructive ones, changes what the next candidate measures); each is followed by an
honest candidate whose result must equal its result before the attack, and the cache (less
scratch), the store, the task file and the project tree must hash the same before and after.
Attacks on the project tree only open files for appending (no byte is written), so a sandbox that
fails cannot damage the real tree. Two g++ builds in all: the honest C++ candidate and the C++
static-initialiser attack.
"""

import hashlib
import os
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator
from rewards.harness.sandbox import _HARNESS_ROOT

CANDS = Path(__file__).parent / "candidates"
ROOT = Path(_HARNESS_ROOT)
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the sandbox is Linux namespaces")]

ATTACK = """
import os, socket, glob, sys
import torch.nn as nn
import torch.nn.functional as F

def _attack():
    ATTACK_BODY

_hits = []
try:
    _r = _attack()
    if _r:
        _hits.append(str(_r))
except Exception as e:  # a failed attack is what we want
    pass
if _hits:
    raise RuntimeError("ATTACK SUCCEEDED: " + "; ".join(_hits))


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return F.gelu(self.fc(x))
"""

def attack(body: str) -> str:
    return ATTACK.replace("ATTACK_BODY", body.strip().replace("\n", "\n    "))


def snapshot(d: Path, skip: tuple = ("scratch",)) -> dict:
    out = {}
    for p in sorted(d.rglob("*")) if d.exists() else []:
        rel = p.relative_to(d)
        if rel.parts and rel.parts[0] in skip or any(x in ("__pycache__", ".git", ".pytest_cache") for x in rel.parts):
            continue
        if p.is_file() and not p.is_symlink():
            out[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def source_tree() -> dict:
    return {k: v for k, v in snapshot(ROOT, ("scratch", "docs", "bench", "tests")).items() if k.endswith((".py", ".yaml", ".toml"))}


def same_result(a, b) -> None:
    assert (b.status, b.correct, b.compiled, b.cache_hit) == (a.status, a.correct, a.compiled, a.cache_hit), (b.error, b.log_tail)
    assert b.ref_runtime_us == a.ref_runtime_us  # the cached baseline, read back from disk
    assert b.max_abs_err == a.max_abs_err
    assert 0.1 < b.speedup / a.speedup < 10  # timing noise, not a 1000x rewrite


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("sandbox")
    cache, store = base / "cache", base / "store"
    (store / "runs").mkdir(parents=True)
    (store / "runs" / "part-0.parquet").write_bytes(b"PAR1 rows")
    shutil.copy(CANDS / "tiny_task.py", base / "tiny_task.py")
    mode = os.environ.get("KM_SANDBOX_SUITE_MODE", "best")  # off: the negative control (attacks get through)
    cfg = {"device": "cpu", "cache_dir": str(cache), "timed_calls": 12, "warmup": 2, "sandbox": mode,
           "sandbox_hide": [str(store)], "timeouts_s": {"correctness": 30, "timing": 30}}
    return {"base": base, "cache": cache, "store": store, "task_file": base / "tiny_task.py",
            "task": load_file(base / "tiny_task.py"), "cfg": cfg}


@pytest.fixture(scope="module")
def ev(world):
    with Evaluator(world["cfg"]) as e:
        sb = e._sandbox.evidence
        if sb["mode"] != "off" and (sb["uid"] != "dedicated" or sb["mounts"] == "none" or sb["net"] != "netns"):
            pytest.skip(f"this machine gives the sandbox only {sb} (the attack suite needs root or user namespaces)")
        yield e


@pytest.fixture(scope="module")
def honest_cpp(world, ev):
    src = (CANDS / "cpp_multi.py").read_text().replace("ext.BEHAVIOUR", "ext.legit")
    r = ev.submit(world["task"], src).result()
    assert r.status == "ok", (r.error, r.log_tail)
    return src, r


@pytest.fixture(scope="module")
def before(world, ev, honest_cpp):
    """The honest results before any attack, from a fresh evaluator (baselines read from disk)."""
    return fresh(world, honest_cpp[0])


def fresh(world, src):
    with Evaluator(world["cfg"]) as e:
        return e.submit(world["task"], src).result()


@pytest.fixture
def guarded(world, before, honest_cpp):
    """Hashes before the attack; after it, the honest candidates (fresh evaluator) and the hashes."""
    snaps = {"cache": snapshot(world["cache"]), "store": snapshot(world["store"]),
             "task": world["task_file"].read_bytes(), "tree": source_tree()}
    yield
    after = fresh(world, honest_cpp[0])
    same_result(before, after)
    now = snapshot(world["cache"])
    assert {k: v for k, v in now.items() if k in snaps["cache"]} == snaps["cache"], "a cached file changed"
    # new files: builds, and the orchestrator's signed seals and source lists (tests/test_cache_integrity.py)
    extra = {k for k in set(now) - set(snaps["cache"]) if not k.startswith(("ext/", "seals/"))}
    assert not extra, extra
    assert snapshot(world["store"]) == snaps["store"]
    assert world["task_file"].read_bytes() == snaps["task"]
    assert source_tree() == snaps["tree"]


def run_attack(world, ev, body: str):
    r = ev.submit(world["task"], attack(body)).result()
    assert "ATTACK SUCCEEDED" not in (r.error or ""), r.error
    assert r.status == "ok", (r.error, r.log_tail)  # the attack failed quietly; the program is honest
    assert r.evidence["sandbox"]["uid"] == "dedicated" and r.evidence["sandbox"]["dumpable"] is False
    return r


def test_rewrite_cached_baselines_from_python(world, ev, guarded):
    base = world["cache"] / "baselines"
    assert list(base.glob("*.json")), "the baseline must exist for the attack to mean anything"
    run_attack(world, ev, f"""
import json
hits = []
for p in glob.glob({str(base)!r} + '/*.json') + glob.glob(os.path.expanduser('~/.cache/kernelmine/baselines/*.json')):
    try:
        d = json.load(open(p)); d['ref_runtime_us'] = d['ref_runtime_us'] * 1000
        json.dump(d, open(p, 'w')); hits.append(p)
    except OSError:
        pass
for p in [{str(base)!r} + '/planted.json']:
    try:
        open(p, 'w').write('{{}}'); hits.append(p)
    except OSError:
        pass
return hits
""")


CPP_ATTACK = r'''
import os
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP = r"""
#include <torch/extension.h>
#include <dirent.h>
#include <cstdio>
#include <string>
static int km_rewrite() {
    const char* dirs[] = {"BASELINES", "EXT_VICTIM"};
    for (const char* d : dirs) {
        DIR* dp = opendir(d);
        if (!dp) continue;
        while (struct dirent* e = readdir(dp)) {
            std::string p = std::string(d) + "/" + e->d_name;
            if (e->d_name[0] == '.' && std::string(e->d_name).size() < 3) continue;
            FILE* f = fopen(p.c_str(), "w");
            if (f) { fputs("{\"ref_runtime_us\": 1e9}", f); fclose(f); }
        }
        closedir(dp);
    }
    FILE* f = fopen("BASELINES/planted_by_cpp.json", "w");
    if (f) { fputs("{}", f); fclose(f); }
    return 0;
}
static int km_done = km_rewrite();  // runs when the extension is loaded
torch::Tensor fused(torch::Tensor x, torch::Tensor w, torch::Tensor b) { return at::gelu(at::addmm(b, x, w.t())); }
"""

ext = load_inline(name="km_sandbox_attack", cpp_sources=[CPP], functions=["fused"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return ext.fused(x, self.fc.weight, self.fc.bias)
'''


def victim_build(world) -> Path:
    """The honest C++ candidate's build directory (the one with its marker)."""
    dirs = [d for d in (world["cache"] / "ext").iterdir() if (d / ".km_done").exists() and "km_test_multi" in str(list(d.iterdir()))]
    assert dirs
    return dirs[0]


def test_rewrite_baselines_and_builds_from_a_cpp_static_initialiser(world, ev, honest_cpp, guarded):
    src = CPP_ATTACK.replace("BASELINES", str(world["cache"] / "baselines")).replace("EXT_VICTIM", str(victim_build(world)))
    r = ev.submit(world["task"], src).result()
    assert r.status == "ok" and r.compiled, (r.error, r.log_tail)


def test_overwrite_another_candidates_build(world, ev, honest_cpp, guarded):
    victim = victim_build(world)
    run_attack(world, ev, f"""
hits = []
d = {str(victim)!r}
for n in os.listdir(d) if os.path.isdir(d) else []:
    try:
        open(os.path.join(d, n), 'r+b').write(b'\\x7fELF garbage'); hits.append(n)
    except OSError:
        pass
for n in ('.km_done', 'planted.so'):
    try:
        p = os.path.join(d, n)
        os.remove(p) if n == '.km_done' else open(p, 'w').close()
        hits.append(p)
    except OSError:
        pass
try:
    os.rename(d, d + '.moved'); hits.append('renamed')
except OSError:
    pass
try:
    hits.append('listed ' + str(len(os.listdir(os.path.dirname(d)))))
except OSError:
    pass
return hits
""")


def test_edit_a_task_file(world, ev, guarded):
    run_attack(world, ev, f"""
p = {str(world["task_file"])!r}
try:
    open(p, 'a').write('\\ndef get_inputs():\\n    return []\\n'); return 'task file edited'
except OSError:
    return None
""")


def test_edit_the_projects_code(world, ev, guarded):
    # opened for appending only (no byte written): the real tree is safe even if this got through
    targets = [ROOT / "rewards" / "reward.py", ROOT / "rewards" / "harness" / "evaluator.py",
               ROOT / "rewards" / "harness" / "worker.py", ROOT / "rewards" / "__init__.py"]
    run_attack(world, ev, f"""
hits = []
for p in {[str(t) for t in targets]!r}:
    try:
        with open(p, 'a'):
            hits.append('writable ' + p)
    except OSError:
        pass
try:
    import rewards.harness as h
    hits.append('readable ' + str(os.listdir(os.path.dirname(os.path.dirname(h.__file__)))))
    if os.path.exists(os.path.join(os.path.dirname(os.path.dirname(h.__file__)), 'reward.py')):
        hits.append('reward.py readable')
except OSError:
    pass
return [x for x in hits if 'reward.py' in x or 'writable' in x]
""")


def test_write_into_the_store(world, ev, guarded):
    run_attack(world, ev, f"""
hits = []
for p in ({str(world["store"] / "runs" / "part-0.parquet")!r}, {str(world["store"] / "runs" / "planted.parquet")!r}):
    try:
        open(p, 'ab').write(b'forged'); hits.append(p)
    except OSError:
        pass
if os.path.exists({str(world["store"] / "runs")!r}):
    hits.append('store visible')
return hits
""")


def test_read_the_orchestrators_memory_and_environ(world, ev, guarded, monkeypatch):
    monkeypatch.setenv("KM_SANDBOX_TEST_SECRET_TOKEN", "hunter2")  # in the orchestrator only
    run_attack(world, ev, f"""
hits = []
for pid in {{os.getppid(), {os.getpid()}}}:
    try:
        if b'hunter2' in open(f'/proc/{{pid}}/environ', 'rb').read():
            hits.append('environ')
    except OSError:
        pass
    try:
        maps = open(f'/proc/{{pid}}/maps').read().split()
        lo = int(maps[0].split('-')[0], 16)
        with open(f'/proc/{{pid}}/mem', 'rb') as m:
            m.seek(lo); m.read(16); hits.append('mem')
    except (OSError, ValueError, IndexError):
        pass
return hits
""")


def test_read_reference_outputs(world, ev, guarded):
    # the reference outputs live in the orchestrator and the reference worker (root, not this
    # candidate's uid) and nowhere on disk a candidate can reach
    run_attack(world, ev, """
hits = []
for p in os.listdir('/proc'):
    if not p.isdigit():
        continue
    try:
        cmd = open(f'/proc/{p}/cmdline', 'rb').read()
    except OSError:
        continue
    if b'rewards.harness.worker\\x00reference' in cmd:
        try:
            with open(f'/proc/{p}/mem', 'rb') as m:
                m.read(1)
            hits.append('reference memory')
        except OSError:
            pass
        try:
            os.listdir(f'/proc/{p}/fd'); hits.append('reference fds')
        except OSError:
            pass
for d in glob.glob(os.path.dirname(os.getcwd()) + '/*'):
    if d != os.getcwd():
        hits.append('other scratch ' + d)
return hits
""")


def test_open_a_socket(world, ev, guarded):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    usrv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    usrv.bind("\0km-sandbox-test")
    usrv.listen(1)
    try:
        run_attack(world, ev, f"""
hits = []
for addr in (('127.0.0.1', {srv.getsockname()[1]}), ('1.1.1.1', 53)):
    try:
        socket.create_connection(addr, timeout=2).close(); hits.append(str(addr))
    except OSError:
        pass
try:
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); u.connect('\\0km-sandbox-test'); hits.append('unix')
except OSError:
    pass
return hits
""")
    finally:
        srv.close()
        usrv.close()


def _sleepers(tag: str) -> list[int]:
    out = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and tag.encode() in open(f"/proc/{p}/cmdline", "rb").read():
                out.append(int(p))
        except OSError:
            pass
    return out


def test_fork_a_process_that_outlives_the_evaluation(world, ev, guarded):
    tag = f"{time.time() % 1000:.3f}"
    r = ev.submit(world["task"], attack(f"""
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/bin/sleep', ['sleep', '{tag}'])
    os._exit(0)
return None
""")).result()
    time.sleep(0.5)
    left = _sleepers(tag)
    for pid in left:  # the negative control (sandbox off) leaves them: this test started them
        os.kill(pid, 9)
    assert left == [], "a daemon of the candidate outlived its evaluation"
    assert r.status == "ok" and r.evidence["sandbox"]["reap"] == "uid", r.error


def test_a_sandboxed_candidate_has_a_user_name(world, ev):
    """Not an attack: the sandbox uid has no passwd entry, and torch's compile caches (inductor,
    and through them the profiler worker on the H200) call getpass.getuser(), which then raised
    KeyError and broke every profiled run. USER/LOGNAME in the worker's env answer it."""
    probe = ("        import getpass\n"
             "        assert getpass.getuser().startswith('km-sandbox-'), getpass.getuser()")
    r = ev.submit(world["task"], (CANDS / "py_probe.py").read_text().replace("        PROBE", probe)).result()
    assert r.status == "ok", (r.error, r.log_tail)


def test_build_cuts_apply_inside_the_sandbox(world, honest_cpp):
    """The compiler wrappers (harness.build_speed) live in the cache, which a sandboxed build worker
    sees hidden: they must then run from the worker's own directory, not silently switch off."""
    assert list(world["cache"].glob("ext/*/main.km_light.cpp")), "the binding unit was built without light_binding"


def test_a_failed_build_fails_the_same_way_again(world, ev):
    """The orchestrator seals a failed build's folder read-only to workers; the next build worker
    that meets it (a second submit, a fresh evaluator) answers with the recorded compiler error
    instead of failing to take the folder's lock (PermissionError, seen on the H200)."""
    src = (CANDS / "cpp_compile_error.py").read_text()
    first = ev.submit(world["task"], src).result()
    again = fresh(world, src)
    assert first.status == again.status == "compile_error", (first.error, again.error)
    assert "Permission" not in (again.error or "") and "undeclared_thing" in (again.error or ""), again.error
    assert again.evidence["build_compiles"] == 0  # the recorded failure, not a second compile
