"""Builds a candidate triggers at construction (load_inline in __init__, in helpers, in try:
blocks, before a .cuda()) happen in the build pool and nowhere else (issue 17), with real g++.

A compiler wrapper (CXX) logs every compile with the role of the worker that ran it, so "no build
in the slot" is checked independently of the harness's own count (evidence.slot_builds)."""

import collections
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator

CANDS = Path(__file__).parent / "candidates"
pytestmark = pytest.mark.slow

WRAPPER = r"""#!/bin/bash
# logs "<worker role>" for every compile (-c), then runs the real compiler
p=$PPID; role=none
for _ in 1 2 3 4 5 6 7 8; do
  c=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)
  case "$c" in *rewards.harness.worker*) role=$(echo "$c" | sed 's/.*rewards\.harness\.worker \([a-z]*\).*/\1/'); break;; esac
  p=$(awk '/^PPid:/{print $2}' /proc/$p/status 2>/dev/null); [ -z "$p" ] && break
done
case " $* " in *" -c "*) echo "$role" >> "$KM_TEST_CXX_LOG";; esac
exec c++ "$@"
"""


def shape(name: str) -> str:
    return (CANDS / "init_pybind.py").read_text().replace('shape = "SHAPE"', f'shape = "{name}"')


def broken(src: str) -> str:
    out = src.replace("return 1.0;", "return undeclared_thing;").replace("at::gelu(", "undeclared_gelu(")
    assert out != src
    return out


def roles(log: Path) -> collections.Counter:
    return collections.Counter(log.read_text().split()) if log.exists() else collections.Counter()


@pytest.fixture(scope="module")
def cxx_log(tmp_path_factory):
    d = tmp_path_factory.mktemp("cxx")
    (d / "c++").write_text(WRAPPER)
    (d / "c++").chmod((d / "c++").stat().st_mode | stat.S_IEXEC)
    old = {k: os.environ.get(k) for k in ("CXX", "KM_TEST_CXX_LOG")}
    os.environ.update(CXX=str(d / "c++"), KM_TEST_CXX_LOG=str(d / "log"))
    yield d / "log"
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


def _cfg(cache, **kw) -> dict:
    # sandbox off: the compiler wrapper and its log live in tmp_path, which the sandbox hides
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 8, "warmup": 1, "sandbox": "off",
            "timeouts_s": {"correctness": 120, "timing": 120, "start": 300}, **kw}


@pytest.fixture(scope="module")
def ev(cxx_log, tmp_path_factory):
    with Evaluator(_cfg(tmp_path_factory.mktemp("kmcache"))) as e:
        yield e


@pytest.fixture(scope="module")
def first(ev, task):
    return ev.submit(task, (CANDS / "init_build.py").read_text()).result()


def captured(r, compiles: int = 1) -> None:
    e = r.evidence
    assert e["build_compiles"] == compiles, e  # built in the build worker ...
    assert e["slot_builds"] == 0, e  # ... and loaded from the cache by the candidate worker
    assert "build_construct" in e["phases_s"]


def test_load_inline_in_init_builds_in_the_pool(first, cxx_log):
    assert first.status == "ok", (first.error, first.log_tail)
    assert first.correct and first.compiled and first.cache_hit is False
    captured(first)
    assert first.evidence["construct"] == "ok"
    assert first.evidence["phases_s"]["build"] >= first.build_s > 1
    seen = roles(cxx_log)
    assert seen["build"] >= 1 and seen["candidate"] == 0 and seen["profiler"] == 0, seen


@pytest.mark.parametrize("name", ["helper", "try", "load"])
def test_helper_and_try_builds_are_captured(ev, task, first, name):
    r = ev.submit(task, shape(name)).result()
    assert r.status == "ok" and r.correct, (r.error, r.log_tail)
    captured(r)


def test_cuda_call_after_the_build_still_captures_it(ev, task, first, cxx_log):
    r = ev.submit(task, shape("cuda_after")).result()
    # a CPU run: the candidate worker's .cuda() raises too, as it would under KernelBench on a CPU
    assert r.status == "runtime_error", r.error
    captured(r)
    assert r.evidence["construct"] == "raised" and "cuda" in r.evidence["construct_error"].lower()
    assert roles(cxx_log)["candidate"] == 0


def test_failing_build_in_init_is_a_compile_error(ev, task, first):
    r = ev.submit(task, broken((CANDS / "init_build.py").read_text())).result()
    assert r.status == "compile_error" and not r.compiled, r.error
    assert "undeclared_gelu" in (r.error or "") + (r.log_tail or "")
    assert "slot_builds" not in r.evidence  # never reached the slot


def test_build_worker_dying_while_constructing_falls_back_to_building_without(ev, task, first):
    """A constructor that crashes only where no GPU is visible (the build worker) is built again
    without constructing and judged as before: never a compile error."""
    src = shape("helper").replace("    def forward", "        import os, sys\n        if sys.argv[1:2] == ['build']:\n"
                                  "            os.abort()\n\n    def forward")
    r = ev.submit(task, src).result()
    assert r.status == "ok" and r.correct, (r.error, r.log_tail)
    assert r.evidence["construct"] == "crashed" and "died" in r.evidence["construct_error"]
    assert r.evidence["slot_builds"] == 0  # the build before the crash was cached


def test_failing_build_swallowed_by_try_is_not_compiled_again_in_the_slot(ev, task, first, cxx_log):
    before = roles(cxx_log)
    r = ev.submit(task, broken(shape("try"))).result()
    assert r.status == "ok", (r.error, r.log_tail)  # the program's own fallback runs, as under KernelBench
    assert r.evidence["failed_builds"] == 1 and r.evidence["slot_builds"] == 0
    after = roles(cxx_log)
    assert after["build"] - before["build"] == 1 and after["candidate"] == 0


def test_a_name_built_again_after_a_failed_attempt_is_served_from_the_cache(ev, task, cxx_log):
    """torch renames a second build of one name in a process (<name>_v1); the candidate worker
    imports <name> from the key's folder. Seen on the H200: two real programs whose fast-build
    rewrite failed were then rebuilt in the sandboxed worker, which may not build (PermissionError)."""
    before = roles(cxx_log)
    r = ev.submit(task, shape("retry")).result()
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.evidence["failed_builds"] == 1 and r.evidence["slot_builds"] == 0, r.evidence
    assert roles(cxx_log)["candidate"] == before["candidate"]  # no compiler ran in the slot


def test_load_is_keyed_on_file_contents(tmp_path):
    src = shape("load")
    first = do_build(tmp_path, src, cwd="a")
    assert first["ok"] and first["construct"] == "ok" and first["compiles"] == 1, first
    assert do_build(tmp_path, src, cwd="b")["compiles"] == 0  # same contents, another cwd: the cache
    assert do_build(tmp_path, src.replace("return 1.0;", "return 1.0 + 0.0;"), cwd="c")["compiles"] == 1


def test_an_extension_is_compiled_once(ev, task, first, cxx_log):
    before = roles(cxx_log)
    again = ev.submit(task, (CANDS / "init_build.py").read_text()).result()
    assert again.status == "ok" and again.cache_hit is True
    assert again.evidence["build_compiles"] == 0 and again.evidence["slot_builds"] == 0
    assert roles(cxx_log) == before  # no compiler ran anywhere


def test_identical_candidates_at_once_compile_once_and_none_is_discarded(task, cxx_log, tmp_path, monkeypatch):
    """A GRPO group often holds one completion twice. Submitted at once, one build compiles and
    the other waits on the key's lock and hits the cache. Here the compile's seal comes late (the
    order CI met in session 22: the hit reported first): the hit's check before its load must
    wait for that seal, not discard the fresh build as a plant and build it again in the slot."""
    src = shape("helper")  # a cache of its own: compiled afresh
    with Evaluator(_cfg(tmp_path, build_workers=2)) as e:
        seal = e._seals.seal

        def late(k):
            time.sleep(3.0)
            return seal(k)

        monkeypatch.setattr(e._seals, "seal", late)
        before = roles(cxx_log)
        rs = [f.result() for f in [e.submit(task, src) for _ in range(3)]]
    for r in rs:
        assert r.status == "ok" and r.correct, (r.error, r.log_tail)
        assert r.evidence["slot_builds"] == 0 and not r.evidence.get("cache_tampered"), r.evidence
    assert sorted(r.evidence["build_compiles"] for r in rs) == [0, 0, 1]
    new = roles(cxx_log) - before
    assert set(new) == {"build"}, new  # every compile in the build pool, none in a slot


def test_without_construction_the_slot_builds_and_says_so(task, cxx_log, tmp_path):
    """The control: the counter is not trivially 0."""
    with Evaluator(_cfg(tmp_path, build_construct={"enabled": False})) as e:
        r = e.submit(task, shape("helper")).result()
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.evidence["build_compiles"] == 0 and r.evidence["slot_builds"] == 1
    assert r.evidence["phases_s"]["slot_build"] > 0
    assert roles(cxx_log)["candidate"] >= 1


# -- the build worker's construct step on its own (a subprocess per case) -----------------------
def do_build(tmp_path, src: str, device: str = "cpu", cwd: str = "", **construct) -> dict:
    job = {"source": src, "cache_root": str(tmp_path / "cache"), "fast_build": False, "seed": 42,
           "task_source": (CANDS / "tiny_task.py").read_text(), "overrides": {}, "shared_namespace": True,
           "op": "build", "construct": {"enabled": True, "timeout_s": 60, "memory_gb": 16, **construct}}
    code = ("import json, sys; from rewards.harness import worker; r = worker.do_build(json.loads(sys.argv[1]));"
            "print(json.dumps({k: v for k, v in r.items() if k != 'cuda_sources'}, default=str))")
    (tmp_path / cwd).mkdir(exist_ok=True)
    p = subprocess.run([sys.executable, "-c", code, json.dumps(job)], cwd=tmp_path / cwd, capture_output=True, text=True,
                       env={**os.environ, "KM_DEVICE": device, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_gpu_run_keeps_cuda_placements_on_the_cpu_so_the_build_is_reached(tmp_path):
    src = shape("cuda_before")
    off = do_build(tmp_path, src, device="cpu")  # a CPU run: .cuda() before the build stops it
    assert off["ok"] and off["construct"] == "raised" and off["compiles"] == 0
    on = do_build(tmp_path, src, device="cuda")
    assert on["ok"] and on["construct"] == "ok" and on["compiles"] == 1, on


def test_construction_time_budget_excludes_builds_and_stops_a_hang(tmp_path):
    src = shape("helper").replace("    def forward", "        while True:\n            pass\n\n    def forward")
    r = do_build(tmp_path, src, timeout_s=2)
    assert r["ok"] and r["construct"] == "timeout" and r["compiles"] == 1  # the ~5 s build ran to its end
    assert r["construct_s"] < 30


def test_torch_compile_while_constructing_returns_the_model_and_the_build_is_reached(tmp_path):
    """torch.compile in __init__ costs the build pool dynamo's import (10-16 s per candidate, H100)
    and builds nothing: while constructing it returns the model itself. The control compiles."""
    src = shape("compile_first")
    r = do_build(tmp_path, src)
    assert r["ok"] and r["construct"] == "ok" and r["compiles"] == 1, r
    real = do_build(tmp_path, src, cwd="real", run_compile=True)
    assert real["construct"] == "raised" and "compiled while constructing" in real["construct_error"], real
    assert real["compiles"] == 0  # the build after it was not reached: it would run in the slot


def test_construction_memory_is_capped(tmp_path):
    src = shape("helper").replace("    def forward", "        self.big = torch.ones(2**34)\n\n    def forward")
    r = do_build(tmp_path, src, memory_gb=1)
    assert r["ok"] and r["construct"] == "raised" and r["compiles"] == 1, r
    assert "alloc" in r["construct_error"].lower() or "memory" in r["construct_error"].lower()
