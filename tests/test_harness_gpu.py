"""The harness on a GPU with real CUDA builds (run on the GPU machine)."""

from pathlib import Path

import pytest

from mining.tasks import load_file
from rewards.harness import Evaluator

CANDS = Path(__file__).parent / "candidates"
pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def cuda_cand(mode: int, py_stream: str = "none") -> str:
    return (CANDS / "cuda_gelu.py").read_text().replace("#define MODE 0", f"#define MODE {mode}").replace(
        'PY_STREAM = "none"', f"PY_STREAM = {py_stream!r}")


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    task = load_file(CANDS / "tiny_task.py")
    cfg = {"device": "cuda", "cache_dir": str(tmp_path_factory.mktemp("kmcache")), "compile_baseline": False}
    with Evaluator(cfg) as ev:
        futs = {m: ev.submit(task, cuda_cand(m, "unjoined" if m == 3 else "none")) for m in (0, 1, 2, 3, 4)}
        out = {m: f.result() for m, f in futs.items()}  # the builds overlapped in the pool
        later = {"after_crash": ev.submit(task, cuda_cand(0)), "joined": ev.submit(task, cuda_cand(0, "joined"))}
        out.update({k: f.result() for k, f in later.items()})
    for k, r in out.items():
        print(k, r.status, r.build_s, r.cache_hit, r.runtime_us, r.error, {x: r.evidence.get(x) for x in (
            "event_us", "wall_us", "timer_ratio", "side_stream", "streams", "hidden_kernels", "candidate_kernel_share",
            "launches_per_call", "phases_s", "fast_build", "judge_device")})
    return out


def test_legit_cuda_candidate_passes(results):
    r = results[0]
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.correct and r.runtime_us > 0 and r.ref_runtime_us > 0 and r.speedup > 0
    assert r.gpu and r.cuda and r.evidence["event_us"] > 0
    assert r.evidence["timer_disagreement"] is False and r.evidence["side_stream"] is False


def test_the_gpu_judge_catches_one_wrong_element(results):
    """Outputs are compared on the slot's GPU by the orchestrator, not by the candidate."""
    assert results[0].evidence["judge_device"] == "cuda:0" and results[0].correct
    bad = results[4]
    assert bad.status == "incorrect" and not bad.correct, (bad.status, bad.error)
    assert "differs from the reference" in bad.error and bad.max_abs_err == pytest.approx(1.0, abs=0.05)
    assert bad.evidence["judge_device"] == "cuda:0"


def test_kernel_attribution(results):
    ev = results[0].evidence
    assert ev["declared_kernels"] == ["gelu_fwd_kernel", "unused_decoy_kernel"]
    assert ev["launched_candidate_kernels"] == ["gelu_fwd_kernel"]
    assert ev["decoy_kernels"] == ["unused_decoy_kernel"]
    origins = {k["name"]: k["origin"] for k in ev["kernels"]}
    assert any("gelu_fwd_kernel" in n and o == "candidate" for n, o in origins.items())
    assert any(o == "library" for o in origins.values())  # the cuBLAS GEMM
    assert 0.0 < ev["candidate_kernel_share"] < 1.0
    assert ev["launches_per_call"] >= 2


def test_side_stream_is_flagged(results):
    r = results[1]
    assert r.status == "ok", r.error  # correct values, hidden timing
    assert r.evidence["side_stream"] is True
    assert r.evidence["timer_disagreement"] is True
    assert r.runtime_us == pytest.approx(r.evidence["wall_us"])  # the honest clock is reported


def test_illegal_memory_access_crashes_and_next_candidate_is_fine(results):
    assert results[2].status == "crashed" and results[2].evidence["worker_restarts"] == 1
    after = results["after_crash"]
    assert after.status == "ok" and after.correct and after.cache_hit


def test_python_side_stream_is_flagged_by_the_profiler(results):
    r = results[3]  # torch.cuda.Stream() in forward, work launched there, never waited for
    assert r.status == "ok", r.error
    assert r.evidence["side_stream"] is True and "gelu_fwd_kernel" in r.evidence["hidden_kernels"]
    assert r.evidence["timed_stream"] not in r.evidence["streams"]  # the GEMM went there too
    assert r.evidence["timer_disagreement"] is True  # ~1 ms of spin escaped the events


def test_side_stream_joined_back_is_not_flagged(results):
    r = results["joined"]
    assert r.status == "ok" and r.cache_hit, r.error
    assert r.evidence["side_stream"] is False and r.evidence["side_streams_joined"] is True
    assert r.evidence["timer_disagreement"] is False


def test_phase_times_are_recorded(results):
    ph = results[0].evidence["phases_s"]
    assert {"queue", "build", "ref_wait", "slot_wait", "load", "trials", "time", "profile", "total"} <= set(ph)
    assert ph["build"] >= results[0].build_s and ph["total"] >= ph["build"] + ph["time"]


# -- KernelBench semantics on the GPU (mirrors tests/test_harness_semantics.py) ----------------
@pytest.fixture(scope="module")
def semantics(tmp_path_factory):
    import textwrap

    import test_harness_semantics as S

    d = tmp_path_factory.mktemp("sem-tasks")
    tasks = {}
    for name, src in (("bn", S.BN_TASK), ("const", S.CONST_TASK), ("drop", S.DROP_TASK)):
        (d / f"{name}.py").write_text(textwrap.dedent(src))
        tasks[name] = load_file(d / f"{name}.py")
    # raises only while torch.profiler records: the profiled run fails, timing did not
    shy = S.cand("pass").replace("return self.bn(self.fc(x)) * 0.5", (
        "if torch._C._autograd._profiler_enabled():\n"
        "            raise RuntimeError('forced profiler failure')\n"
        "        return self.bn(self.fc(x)) * 0.5"))
    jobs = {"legit": ("bn", S.cand()), "eval_only": ("bn", S.cand("self.eval()")), "shared": ("bn", S.SHARED_CAND),
            "tf32": ("bn", S.cand("torch.backends.cuda.matmul.allow_tf32 = True")), "script": ("bn", S.SCRIPT_CAND),
            "shy": ("bn", shy), "const": ("const", "import torch.nn as nn\nModelNew = Model\n"),
            "dropout": ("drop", S.DROP_CAND)}
    cfg = {"device": "cuda", "cache_dir": str(tmp_path_factory.mktemp("kmcache-sem")), "compile_baseline": False,
           "profiling": {"kernel": {"enabled": False}}}  # ncu's own failures are unit-tested; keep this fast
    with Evaluator(cfg) as ev:
        futs = {k: ev.submit(tasks[t], src) for k, (t, src) in jobs.items()}
        out = {k: f.result() for k, f in futs.items()}
    for k, r in out.items():
        print(k, r.status, r.error, {x: r.evidence.get(x) for x in (
            "model_mode", "unverifiable", "physical_floor_us", "floor_skipped", "precision_flags_changed",
            "profiling_error", "ref_profiling_error")}, r.ref_runtime_us)
    return out


def test_gpu_train_mode_fails_an_eval_only_candidate(semantics):
    assert semantics["legit"].status == "ok", (semantics["legit"].error, semantics["legit"].log_tail)
    assert semantics["eval_only"].status == "incorrect"
    assert semantics["shared"].status == "ok", semantics["shared"].error


def test_gpu_tf32_off_in_the_oracle_and_the_candidates_change_seen(semantics):
    assert semantics["legit"].evidence["precision_flags"]["allow_tf32_cudnn"] is False
    assert semantics["legit"].evidence["precision_flags_changed"] == {}
    assert semantics["tf32"].evidence["precision_flags_changed"]["allow_tf32_matmul"] == [False, True]


def test_gpu_script_module_candidate_is_profiled_without_failing(semantics):
    r = semantics["script"]
    assert r.status == "ok" and r.runtime_us > 0, (r.error, r.log_tail)
    assert "profiling_error" not in r.evidence, r.evidence.get("profiling_error")
    assert r.evidence["system_profile"]["kernels_per_forward"] > 0


def test_gpu_profiler_failure_keeps_status_and_timing(semantics):
    r = semantics["shy"]
    assert r.status == "ok" and r.correct and r.runtime_us > 0, (r.error, r.log_tail)
    assert "forced profiler failure" in r.evidence["profiling_error"]
    assert "profiling_error" not in semantics["legit"].evidence


def test_gpu_unverifiable_floor_and_dropout(semantics):
    assert "does not depend" in semantics["const"].evidence["unverifiable"]
    assert "unverifiable" not in semantics["legit"].evidence
    d = semantics["dropout"]
    assert d.status == "ok" and d.evidence["spot_check_failed"] is False, (d.error, d.log_tail)
    for r in semantics.values():
        ev = r.evidence
        assert ("physical_floor_us" in ev) != ("floor_skipped" in ev)
        if "physical_floor_us" in ev and r.ref_runtime_us:
            assert ev["physical_floor_us"] <= r.ref_runtime_us


def test_gpu_build_in_init_happens_in_the_build_pool(tmp_path):
    """load_inline in __init__ (after .cuda(), behind is_available): built by the build worker,
    which has no GPU; the candidate and profiler workers load it from the cache."""
    task = load_file(CANDS / "tiny_task.py")
    cfg = {"device": "cuda", "cache_dir": str(tmp_path), "compile_baseline": False}
    with Evaluator(cfg) as ev:
        r = ev.submit(task, (CANDS / "cuda_init_build.py").read_text()).result()
    print(r.status, r.error, {k: r.evidence.get(k) for k in ("construct", "construct_error", "build_compiles",
                                                                "slot_builds", "phases_s", "profiling_error")})
    assert r.status == "ok" and r.correct, (r.error, r.log_tail)
    assert r.evidence["build_compiles"] == 1 and r.evidence["slot_builds"] == 0
    assert r.evidence["construct"] == "ok" and "profiling_error" not in r.evidence
    assert "gelu_init_kernel" in r.evidence["declared_kernels"]
