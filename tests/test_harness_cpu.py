"""The harness on CPU with real g++ builds: one shared build, one attack per test."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator

CANDS = Path(__file__).parent / "candidates"
pytestmark = pytest.mark.slow


def multi(behaviour: str) -> str:
    return (CANDS / "cpp_multi.py").read_text().replace("ext.BEHAVIOUR", "ext." + behaviour)


def probe(code: str) -> str:
    return (CANDS / "py_probe.py").read_text().replace("        PROBE", "        " + code)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kmcache")


@pytest.fixture(scope="module")
def task():
    return load_file(CANDS / "tiny_task.py")


@pytest.fixture(scope="module")
def ev(cache):
    cfg = {"device": "cpu", "cache_dir": str(cache), "timed_calls": 12, "warmup": 2,
           "timeouts_s": {"correctness": 20, "timing": 30}}
    with Evaluator(cfg) as e:
        yield e


@pytest.fixture(scope="module")
def first(ev, task):
    return ev.submit(task, multi("legit")).result()


def test_legit_cpp_candidate_passes_with_timing(first):
    assert first.status == "ok", (first.error, first.log_tail)
    assert first.correct and first.compiled and first.trials == 5
    assert first.runtime_us > 0 and first.runtime_iqr_us >= 0 and first.ref_runtime_us > 0
    assert first.speedup == pytest.approx(first.ref_runtime_us / first.runtime_us)
    assert first.max_abs_err < 1e-4
    assert first.cache_hit is False and first.build_s > 1
    assert first.evidence["ref_near_zero"] is False and first.evidence["spot_check_failed"] is False


def test_phase_times_say_where_the_time_went(first):
    ph = first.evidence["phases_s"]
    assert {"queue", "build", "ref_wait", "slot_wait", "start", "load", "trials", "time", "total"} <= set(ph)
    assert ph["build"] >= first.build_s and ph["total"] >= ph["build"] + ph["trials"] + ph["time"]


def test_workers_say_where_their_cpu_went(ev, first):
    """Each phase's worker CPU seconds (every thread of the worker; start: its start-up, torch's
    import included), the figures the throughput bench sums to find a batch's CPU bound."""
    cpu = first.evidence["worker_cpu_s"]
    assert {"load", "trials", "time"} <= set(cpu) and all(v >= 0 for v in cpu.values())
    assert cpu.get("start", 0) + cpu["trials"] + cpu["time"] > 0.1
    prep = [t["prepare_cpu_s"] for t in ev.task_timings]
    assert prep and all(p > 0 for p in prep)


def test_reference_is_prepared_once_per_task(ev, task, first):
    more = [ev.submit(task, multi("legit")) for _ in range(3)]  # queued together, one task
    assert all(f.result().status == "ok" for f in more)
    assert [t["task"] for t in ev.task_timings].count(task.id) == 1


def test_rebuild_hits_cache(ev, task, first):
    again = ev.submit(task, multi("legit")).result()
    assert again.status == "ok" and again.cache_hit is True
    assert again.build_s < 1.0 < first.build_s


@pytest.mark.parametrize("behaviour,error", [
    ("wrong", "differs from the reference"), ("nanout", "NaN"), ("shape", "shape"),
])
def test_wrong_outputs_are_incorrect(ev, task, first, behaviour, error):
    r = ev.submit(task, multi(behaviour)).result()
    assert (r.status, r.correct) == ("incorrect", False)
    assert error in r.error


def test_output_aliasing_input_is_caught(ev, task, first):
    r = ev.submit(task, multi("alias")).result()
    assert r.status == "incorrect" and r.evidence["output_aliases_input"] is True


def test_input_mutation_is_caught_even_with_right_values(ev, task, first):
    r = ev.submit(task, multi("mutate")).result()
    assert r.status == "incorrect" and r.evidence["input_mutated"] is True
    assert "input changed" in r.error


@pytest.mark.parametrize("behaviour", ["segv", "abort_"])
def test_crash_is_contained_and_next_candidate_evaluates(ev, task, first, behaviour):
    bad = ev.submit(task, multi(behaviour)).result()
    assert bad.status == "crashed" and bad.evidence["worker_restarts"] == 1
    assert "SIGSEGV" in bad.error or "SIGABRT" in bad.error
    good = ev.submit(task, multi("legit")).result()
    assert good.status == "ok"


def test_endless_loop_times_out(ev, task):
    r = ev.submit(task, probe("while True: pass")).result()
    assert r.status == "timeout" and "correctness" in r.error, (r.error, r.log_tail)


def test_compile_error_is_reported_with_the_compiler_line(ev, task):
    r = ev.submit(task, (CANDS / "cpp_compile_error.py").read_text()).result()
    assert (r.status, r.compiled) == ("compile_error", False)
    assert "error" in r.error.lower()


def test_missing_model_new_is_invalid(ev, task):
    r = ev.submit(task, "import torch\n").result()
    assert r.status == "invalid" and "ModelNew" in r.error


def test_sandbox_env_and_cwd(ev, task, monkeypatch):
    # the secret is set in the parent after the evaluator started; workers spawn later
    import os
    os.environ["KM_TEST_API_KEY"] = "hunter2"
    try:
        r = ev.submit(task, probe(
            "assert not any('KEY' in k for k in os.environ), 'secret leaked'\n"
            "        assert os.path.basename(os.getcwd()).startswith('km-candidate-'), os.getcwd()\n"
            "        assert 'hunter2' not in open('/proc/self/environ').read()")).result()
    finally:
        del os.environ["KM_TEST_API_KEY"]
    assert r.status == "ok", r.error


@pytest.mark.skipif(sys.platform != "linux", reason="network namespaces are Linux only")
def test_no_network_as_root(ev, task):
    import os
    if os.geteuid() != 0:
        pytest.skip("the network namespace needs root")
    r = ev.submit(task, probe(
        "try:\n            socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
        "        except OSError:\n            pass\n        else:\n            raise RuntimeError('network reachable')\n"
        "        assert [n for _, n in socket.if_nameindex()] == ['lo']")).result()
    assert r.status == "ok", r.error


def test_eval_cli_prints_one_json_object(cache, tmp_path, first):
    cand = tmp_path / "cand.py"
    cand.write_text(multi("legit"))
    p = subprocess.run([sys.executable, "-m", "mining", "eval", str(CANDS / "tiny_task.py"), str(cand),
                        "harness.device=cpu", f"harness.cache_dir={cache}", "harness.timed_calls=5"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)  # the whole of stdout is one object
    assert out["status"] == "ok" and out["cache_hit"] is True
    assert {"runtime_us", "speedup", "evidence", "harness_version", "log_tail"} <= set(out)
    # the reward layer's verdict rides along: a number and the findings behind it
    assert isinstance(out["reward"], float) and isinstance(out["findings"], list)
    assert {"rule", "rubric", "major_hack"} <= set(out["reward_detail"])


def test_eval_cli_usage_errors_are_one_sentence(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mining", "eval", str(CANDS / "tiny_task.py"),
                        str(tmp_path / "missing.py")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "does not exist" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "mining", "eval", "no_such_task", str(CANDS / "tiny_task.py")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "no task 'no_such_task'" in p.stderr
