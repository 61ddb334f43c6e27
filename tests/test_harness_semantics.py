"""KernelBench semantics in the harness (CPU): model mode, the shared namespace, the oracle's
precision, the physical floor, unverifiable tasks and instrumentation failures.

The fast tests call the pure pieces; the slow ones run the real harness (spawned workers) on
small tasks written here, each hack-or-quirk case next to a legitimate twin.
"""

import collections
import concurrent.futures as cf
import contextlib
import doctest
import os
import textwrap
import threading
import types
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from mining.tasks import load_file
from rewards.harness import Evaluator, baselines, floor, gpulock, precision, sysprof
from rewards.harness import evaluator as evmod
from rewards.harness.config import HarnessConfig
from rewards.harness.result import EvalResult

slow = pytest.mark.slow
CE = {"bandwidth_Bps": 1e12, "peak_flops": {"float32": 1e12, "float16": 1e13}, "peak_flops_tf32": 8e12}


# -- pure pieces -------------------------------------------------------------------------------
def test_doctests():
    for m in (floor, precision):
        assert doctest.testmod(m).failed == 0


def test_floor_above_reference_runtime_is_skipped_with_a_reason():
    fl, why = floor.physical_floor(1e9, 0.0, "float32", CE, False, 200.0)  # 1000 us of fp32 math
    assert fl is None and "above the reference's own measured runtime" in why
    fl, why = floor.physical_floor(1e9, 0.0, "float32", CE, False, 2000.0)  # the twin: below
    assert fl == pytest.approx(1000.0) and why is None


def test_floor_uses_tf32_when_the_config_allows_it():
    assert floor.physical_floor(8e9, 0.0, "float32", CE, True, None)[0] == pytest.approx(1000.0)
    assert floor.physical_floor(8e9, 0.0, "float32", CE, False, None)[0] == pytest.approx(8000.0)
    assert floor.physical_floor(1e10, 0.0, "float16", CE, False, None)[0] == pytest.approx(1000.0)
    assert floor.physical_floor(0.0, 5e8, "float32", CE, True, None)[0] == pytest.approx(500.0)  # bandwidth


def test_config_validates_the_new_keys():
    c = HarnessConfig.from_mapping({})
    assert (c.model_mode, c.shared_namespace, c.precision) == ("train", True, {"matmul_tf32": False, "cudnn_tf32": False})
    assert c.trial_modes() == ["train"] and HarnessConfig.from_mapping({"model_mode": "both"}).trial_modes() == ["eval", "train"]
    assert HarnessConfig.from_mapping({"precision": {"cudnn_tf32": True}}).tf32_allowed()
    assert HarnessConfig.from_mapping({"precision": {"cudnn_tf32": True}}).precision["matmul_tf32"] is False
    for bad in ({"model_mode": "inference"}, {"precision": {"tf32": True}}, {"precision": {"matmul_tf32": "yes"}}):
        with pytest.raises(ValueError):
            HarnessConfig.from_mapping(bad)


def test_unverifiable_needs_equal_outputs_and_different_inputs():
    a, b, o = torch.zeros(3), torch.ones(3), torch.full((2,), 7.0)
    assert "does not depend on its inputs" in evmod.unverifiable_reason([([a], [o]), ([b], [o.clone()])])
    assert evmod.unverifiable_reason([([a], [o]), ([b], [o + 1])]) is None  # outputs follow inputs
    assert evmod.unverifiable_reason([([a], [o]), ([a.clone()], [o.clone()])]) is None  # inputs never varied


def test_precision_flags_change_is_observed_on_cpu():
    before = precision.flags()
    try:
        precision.apply({"matmul_tf32": False, "cudnn_tf32": False})
        harness = precision.flags()
        torch.backends.cuda.matmul.allow_tf32 = True  # what a candidate does
        ch = precision.changed(harness, precision.flags())
        assert ch["allow_tf32_matmul"] == [False, True] and "allow_tf32_cudnn" not in ch
        assert precision.changed(harness, harness) == {}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before["allow_tf32_matmul"]
        torch.backends.cudnn.allow_tf32 = before["allow_tf32_cudnn"]


def test_baseline_lookup_returns_unverifiable(tmp_path):
    baselines.store("t1__cpu__x__a", {"ref_runtime_us": 5.0, "overrides": {}, "unverifiable": "constant"}, str(tmp_path))
    assert baselines.lookup("t1", str(tmp_path))["unverifiable"] == "constant"
    baselines.store("t2__cpu__x__a", {"ref_runtime_us": 5.0, "overrides": {}, "unverifiable": None}, str(tmp_path))
    assert baselines.lookup("t2", str(tmp_path))["unverifiable"] is None
    k = lambda v: baselines.key("t", "gpu", "2", {}, 10, v)  # noqa: E731
    assert k({"model_mode": "train"}) != k({"model_mode": "eval"})  # eval timings never stand in for train


def test_shared_names_are_the_reference_source_only():
    from rewards.harness.reference import shared_names

    ns = shared_names(textwrap.dedent(BN_TASK), {"batch_size": 4})
    assert ns["batch_size"] == 4 and ns["features"] == 8  # the same overrides as the reference
    assert set(ns) == {"torch", "nn", "batch_size", "features", "scale_of", "Model", "get_inputs", "get_init_inputs"}


# -- instrumentation ---------------------------------------------------------------------------
class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.bn = nn.Linear(4, 4), nn.BatchNorm1d(4)

    def forward(self, x):
        return torch.relu(self.bn(self.fc(x)))


class _Outer(nn.Module):
    def __init__(self, scripted):
        super().__init__()
        self.inner = scripted
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.inner(x))


@pytest.mark.parametrize("nest", [False, True])
def test_annotate_survives_script_modules(nest):
    scripted = torch.jit.script(_Block())
    model = _Outer(scripted) if nest else scripted
    x = torch.randn(3, 4)
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
        with sysprof.annotate(model) as ann:
            y = model(x)
    assert y.shape[0] == 3
    if nest:  # the plain modules keep their ranges; the scripted subtree is skipped whole
        assert ann.skipped == ["inner"] and ann.hooked_root
        assert {"km::forward", "km::module::head"} == set(ann.modules)
    else:
        assert ann.skipped == ["<root>"] and not ann.hooked_root and ann.modules == {}
    if nest:  # the hooks are gone after the block
        assert not model._forward_hooks and not model._forward_pre_hooks and not model.head._forward_hooks


def test_a_plain_model_is_still_annotated_whole():
    model = _Block()
    with torch.no_grad(), sysprof.annotate(model) as ann:
        model(torch.randn(3, 4))
    assert ann.skipped == [] and {"km::forward", "km::module::fc", "km::module::bn"} == set(ann.modules)


class _FakeSlot:
    def __init__(self):
        self.taken, self.gpu = [], None

    def take(self, role):
        self.taken.append(role)
        return object()

    def exclusive(self, *a, **k):  # the GPU lock: no other candidate here
        return contextlib.nullcontext([])


def _early(hello=None, exc=None):
    """A profiler worker taken when the candidate started, with its hello (or its start failing)."""
    f = cf.Future()
    f.set_exception(exc) if exc is not None else f.set_result(hello or {})
    return object(), f


def _profile_with(timed_fn, early=None):
    ev = Evaluator({"device": "cpu"})  # not entered: no workers; _profile is called directly
    r = EvalResult(status="ok", compiled=True, correct=True, runtime_us=12.0)
    e, holder = {"phases_s": {}}, []
    ctx = {"sets": [([torch.zeros(1)], [])], "dtype": "float32", "task_source": "", "overrides": {}}
    ev._profile(_FakeSlot(), {}, "src", ctx, e, timed_fn, holder, early or _early())
    return r, e, holder


def test_forced_profiler_failure_leaves_status_and_timing_with_profiling_error():
    def timed(name, job, limit, who=None):
        if name == "profile":
            raise evmod.WorkerRaised("RuntimeError: register_forward_pre_hook is not supported on ScriptModules")
        return {}
    r, e, holder = _profile_with(timed)
    assert (r.status, r.correct, r.runtime_us) == ("ok", True, 12.0)
    assert "the profiled run failed" in e["profiling_error"] and "ScriptModules" in e["profiling_error"]
    assert len(holder) == 1  # the profiler worker is handed back for dropping


class _LockSlot(_FakeSlot):
    """A slot that says whether the GPU lock is held."""

    def __init__(self):
        super().__init__()
        self.locked = False

    @contextlib.contextmanager
    def exclusive(self, *a, **k):
        self.locked = True
        try:
            yield []
        finally:
            self.locked = False


@pytest.mark.parametrize("early", [True, False])
def test_the_profiled_runs_warming_forward_runs_outside_the_gpu_lock(early):
    ev = Evaluator({"device": "cpu", "profile_warm_early": early})
    slot, calls, jobs = _LockSlot(), [], {}

    def timed(name, job, limit, who=None):
        calls.append((name, slot.locked))
        jobs[name] = job
        return {}
    ctx = {"sets": [([torch.zeros(1)], [])], "dtype": "float32", "task_source": "", "overrides": {}}
    ev._profile(slot, {}, "src", ctx, {"phases_s": {}}, timed, [], _early())
    if early:  # the first forward (lazy loading, autotuning) before the lock; the locked run skips its own
        assert calls == [("profile_load", False), ("profile_warm", False), ("profile", True), ("profile_summary", False)]
        assert jobs["profile_warm"]["op"] == "warm" and jobs["profile_warm"]["sets"] == jobs["profile"]["sets"]
        assert jobs["profile"]["warm"] is False
    else:
        assert calls == [("profile_load", False), ("profile", True), ("profile_summary", False)]
        assert jobs["profile"]["warm"] is True


def test_the_same_worker_starts_cupti_then_profiles_without_loading_again():
    """``profile_worker: same``: CUPTI starts in the timed worker outside the lock, no profiler is
    taken and nothing is loaded again; a CUPTI that cannot start is evidence, its failure the
    profile op's to report."""
    ev = Evaluator({"device": "cpu", "profile_worker": "same"})
    slot, calls, asked = _LockSlot(), [], []
    me = object()

    def timed(name, job, limit, who=None):
        calls.append((name, slot.locked))
        asked.append(who)
        return {"warm_up_error": "CUPTI_ERROR_NOT_INITIALIZED"} if name == "profile_start" else {}
    ctx = {"sets": [([torch.zeros(1)], [])], "dtype": "float32", "task_source": "", "overrides": {}}
    e, holder = {"phases_s": {}}, []
    ev._profile(slot, {}, "src", ctx, e, timed, holder, same=me)
    assert calls == [("profile_start", False), ("profile_warm", False), ("profile", True), ("profile_summary", False)]
    assert asked[0] is None and all(w is me for w in asked[1:])  # start: the timed worker's own `timed`
    assert holder == [] and e["profiler_warm_up_error"] == "CUPTI_ERROR_NOT_INITIALIZED"


def test_profiler_death_and_timeout_are_instrumentation_errors_too():
    for exc in (evmod.WorkerDied("killed by SIGSEGV"), evmod.PhaseTimeout("no answer within 5 s")):
        def timed(name, job, limit, who=None, exc=exc):
            if name == "profile_load":
                raise exc
            return {}
        _, e, _ = _profile_with(timed)
        assert type(exc).__name__ in e["profiling_error"]


def test_a_profiler_worker_that_fails_to_start_is_a_profiling_error():
    calls = []

    def timed(name, job, limit, who=None):
        calls.append(name)
        return {}
    r, e, holder = _profile_with(timed, _early(exc=evmod.WorkerDied("exited during start-up")))
    assert "WorkerDied" in e["profiling_error"] and calls == [] and len(holder) == 1
    assert r.status == "ok" and "profile_start" in e["phases_s"]


def test_a_warm_up_error_in_the_profiler_hello_is_kept_as_evidence():
    _, e, _ = _profile_with(lambda *a, **k: {}, _early({"warm_up_error": "CUPTI_ERROR_NOT_INITIALIZED"}))
    assert e["profiler_warm_up_error"] == "CUPTI_ERROR_NOT_INITIALIZED" and "profiling_error" not in e


def test_clean_profile_records_no_error():
    _, e, _ = _profile_with(lambda name, job, limit, who=None:
                            {"kernels": [], "op_s": 1.0} if name == "profile_summary" else {})
    assert "profiling_error" not in e and e["kernels"] == [] and "op_s" not in e


# -- the real harness on CPU -------------------------------------------------------------------
BN_TASK = '''
import torch
import torch.nn as nn

batch_size = 16
features = 8


def scale_of(x):
    return x * 0.5


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x):
        return scale_of(self.bn(self.fc(x)))


def get_inputs():
    return [torch.randn(batch_size, features) * 3 + 1]


def get_init_inputs():
    return [features]
'''

CONST_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return self.fc(torch.ones_like(x))  # the input's values never matter


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''

DROP_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.drop = nn.Dropout(0.5)  # active in training mode: the mask comes from the RNG

    def forward(self, x):
        return self.drop(self.fc(x))


def get_inputs():
    return [torch.randn(32, 16)]


def get_init_inputs():
    return [16]
'''

DROP_CAND = '''
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)

    def forward(self, x):
        return F.dropout(self.fc(x), 0.5, self.training)
'''

CAND = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.bn = nn.BatchNorm1d(n)
        PROBE

    def forward(self, x):
        return self.bn(self.fc(x)) * 0.5
'''

# uses the reference's helper and constant without defining them (KernelBench's shared namespace)
SHARED_CAND = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        assert n == features
        self.fc = nn.Linear(n, n)
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x):
        assert x.shape[0] == batch_size
        return scale_of(self.bn(self.fc(x)))
'''

SCRIPT_CAND = '''
import torch
import torch.nn as nn


class _Inner(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, n)
        self.bn = nn.BatchNorm1d(n)

    def forward(self, x):
        return self.bn(self.fc(x)) * 0.5


def ModelNew(n):  # the model is a RecursiveScriptModule
    return torch.jit.script(_Inner(n))
'''


def cand(probe: str = "pass") -> str:
    return CAND.replace("PROBE", probe)


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("tasks")
    out = {}
    for name, src in (("bn_task", BN_TASK), ("const_task", CONST_TASK), ("drop_task", DROP_TASK)):
        (d / f"{name}.py").write_text(textwrap.dedent(src))
        out[name] = load_file(d / f"{name}.py")
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("kmcache-sem")


def _cfg(cache, **kw):
    return {"device": "cpu", "cache_dir": str(cache), "timed_calls": 5, "warmup": 1,
            "timeouts_s": {"correctness": 30, "timing": 60}, **kw}


@pytest.fixture(scope="module")
def train_results(tasks, cache):
    """One evaluator at the defaults (train mode, shared namespace, TF32 off)."""
    jobs = {"legit": (tasks["bn_task"], cand()),
            "eval_only": (tasks["bn_task"], cand("self.eval()")),
            "shared": (tasks["bn_task"], SHARED_CAND),
            "tf32": (tasks["bn_task"], cand("torch.backends.cuda.matmul.allow_tf32 = True")),
            "script": (tasks["bn_task"], SCRIPT_CAND),
            "tf32_wrong": (tasks["bn_task"], cand("torch.backends.cudnn.allow_tf32 = True; self.eval()")),
            "const": (tasks["const_task"], "import torch.nn as nn\nModelNew = Model\n"),
            "dropout": (tasks["drop_task"], DROP_CAND),
            "no_dropout": (tasks["drop_task"], DROP_CAND.replace("self.training)", "False)"))}
    with Evaluator(_cfg(cache, profile=True)) as ev:
        futs = {k: ev.submit(t, src) for k, (t, src) in jobs.items()}
        return {k: f.result() for k, f in futs.items()}


@slow
def test_train_mode_is_the_default_and_fails_an_eval_only_candidate(train_results):
    ok, bad = train_results["legit"], train_results["eval_only"]
    assert ok.status == "ok", (ok.error, ok.log_tail)
    assert ok.evidence["model_mode"] == "train" and "mode_verdicts" not in ok.evidence
    assert bad.status == "incorrect" and "differs from the reference" in bad.error


@slow
def test_training_mode_dropout_is_seeded_alike_in_both_processes(train_results):
    r, twin = train_results["dropout"], train_results["no_dropout"]
    assert r.status == "ok", (r.error, r.log_tail)  # trials and spot-checked timed calls agree
    assert r.evidence["spot_check_failed"] is False
    assert twin.status == "incorrect"  # the reference really drops: skipping it is wrong


@slow
def test_candidate_uses_reference_only_names(train_results):
    r = train_results["shared"]
    assert r.status == "ok", (r.error, r.log_tail)


@slow
def test_precision_flags_changed_names_the_candidates_tf32(train_results):
    r, twin = train_results["tf32"], train_results["legit"]
    assert r.status == "ok", r.error  # on CPU TF32 changes nothing numerically; the flag is seen
    assert r.evidence["precision_flags_changed"]["allow_tf32_matmul"] == [False, True]
    assert r.evidence["precision_flags"]["allow_tf32_matmul"] is True
    assert twin.evidence["precision_flags_changed"] == {}
    assert twin.evidence["precision_flags"]["allow_tf32_cudnn"] is False  # the harness's setting
    wrong = train_results["tf32_wrong"]  # an incorrect candidate's flags are recorded too
    assert wrong.status == "incorrect" and wrong.evidence["precision_flags_changed"] == {"allow_tf32_cudnn": [False, True]}


@slow
def test_script_module_candidate_passes(train_results):
    r = train_results["script"]
    assert r.status == "ok" and r.runtime_us > 0, (r.error, r.log_tail)
    assert "profiling_error" not in r.evidence


@slow
def test_constant_reference_is_unverifiable_and_cached(train_results, tasks, cache):
    r, twin = train_results["const"], train_results["legit"]
    assert r.status == "ok" and r.correct  # status stays as measured
    assert "does not depend on its inputs" in r.evidence["unverifiable"]
    assert "unverifiable" not in twin.evidence
    assert "does not depend" in baselines.lookup(tasks["const_task"].hash, str(cache))["unverifiable"]
    assert baselines.lookup(tasks["bn_task"].hash, str(cache))["unverifiable"] is None


@slow
def test_floor_is_never_above_the_reference_runtime(train_results):
    for r in train_results.values():
        ev = r.evidence
        assert ("physical_floor_us" in ev) != ("floor_skipped" in ev)
        if "physical_floor_us" in ev and r.ref_runtime_us:
            assert ev["physical_floor_us"] <= r.ref_runtime_us


@slow
def test_eval_mode_passes_an_eval_only_candidate(tasks, cache):
    with Evaluator(_cfg(cache, model_mode="eval")) as ev:
        bad, ok = ev.submit(tasks["bn_task"], cand("self.eval()")), ev.submit(tasks["bn_task"], cand())
        bad, ok = bad.result(), ok.result()
    assert bad.status == "ok", (bad.error, bad.log_tail)
    assert ok.status == "ok" and ok.evidence["model_mode"] == "eval"


@slow
def test_both_modes_report_the_difference(tasks, cache):
    with Evaluator(_cfg(cache, model_mode="both")) as ev:
        bad, ok = ev.submit(tasks["bn_task"], cand("self.eval()")), ev.submit(tasks["bn_task"], cand())
        bad, ok = bad.result(), ok.result()
    assert bad.evidence["mode_verdicts"] == {"train": "incorrect", "eval": "ok"}
    assert bad.evidence["mode_dependent"] is True and bad.status == "incorrect"
    assert ok.status == "ok", (ok.error, ok.log_tail)
    assert ok.evidence["mode_verdicts"] == {"train": "ok", "eval": "ok"} and ok.evidence["mode_dependent"] is False


@slow
def test_without_the_shared_namespace_reference_names_are_missing(tasks, cache):
    with Evaluator(_cfg(cache, shared_namespace=False)) as ev:
        r = ev.submit(tasks["bn_task"], SHARED_CAND).result()
    assert r.status == "runtime_error" and "features" in r.error


def test_ncu_failure_is_a_profiling_error_not_a_verdict(monkeypatch):
    from rewards.harness import ncuprof

    ev = Evaluator({"device": "cpu"})
    ev.device = "cuda"  # _ncu runs only on CUDA; ncuprof.profile is replaced, so nothing touches a GPU
    monkeypatch.setattr(ncuprof, "profile", lambda *a, **k: {"status": "failed", "reason": "==ERROR== ERR_NVGPUCTRPERM"})
    calls = []

    def timed(name, job, limit, who=None):
        calls.append(name)
        return {"system_profile": {"top_kernels": [{"base": "k", "share": 1.0, "mean_us": 50.0, "calls": 1}]}} \
            if name == "profile_summary" else {}
    e, holder = {"phases_s": {}}, []
    ctx = {"sets": [([torch.zeros(1)], [])], "dtype": "float32", "task_source": "", "overrides": {}}
    ev._profile(_FakeSlot(), {}, "src", ctx, e, timed, holder, _early())
    assert calls == ["profile_load", "profile_warm", "profile", "profile_summary"]
    assert e["profiling_error"].startswith("ncu failed") and "ERR_NVGPUCTRPERM" in e["profiling_error"]
    assert e["kernel_profile"]["status"] == "failed" and "system_profile" in e  # what was measured stays
    monkeypatch.setattr(ncuprof, "profile", lambda *a, **k: {"status": "unavailable", "reason": "ncu not found"})
    e = {"phases_s": {}}
    ev._profile(_FakeSlot(), {}, "src", ctx, e, timed, [], _early())
    assert "profiling_error" not in e  # no ncu on the machine is not a failure


class _Proc:
    def alive(self):
        return True


def _profile_reference_with(monkeypatch, answer, early: bool = True, kept: int = 0, slot=None):
    """``Evaluator._profile_reference`` against a fake slot and profiler workers (``kept``:
    ``harness.reference_profilers``): the ops sent, each with whether the GPU lock was held and
    to which worker, the record it filled, the workers taken fresh and those dropped."""
    ev = Evaluator({"device": "cpu", "profile_warm_early": early, "reference_profilers": kept})
    slot = slot or _LockSlot()
    slot._mu, slot.ref_profilers = threading.Lock(), getattr(slot, "ref_profilers", collections.deque())
    calls, dropped, fresh = [], [], []

    def take(s):
        fresh.append(_Proc())
        return fresh[-1], _early()[1]
    monkeypatch.setattr(ev, "_early_profiler", take)
    monkeypatch.setattr(ev, "_drop", dropped.append)

    def ask(w, job, limit):
        calls.append((job["op"], slot.locked, w))
        return answer(job)
    monkeypatch.setattr(evmod, "ask", ask)
    base, ctx = {}, {"sets": [([torch.zeros(1)], [])], "dtype": "float32"}
    ev._profile_reference(slot, types.SimpleNamespace(source="SRC", hash="h"), {"B": 2}, ctx, base,
                          {"task": "t1"}, gpulock.REFERENCE)
    assert {c[2] for c in calls} <= set(fresh) | set(slot.ref_profilers) | set(dropped)
    return base, [c[:2] for c in calls], fresh, dropped, slot


def test_the_reference_is_profiled_apart_like_a_candidate(monkeypatch):
    """Loaded from the task source in a profiler worker, warmed outside the lock, only the run
    inside it; the trace's kernels and system profile go into the baseline record."""
    sent = {}

    def answer(job):
        sent[job["op"]] = job
        if job["op"] == "profile_summary":
            return {"kernels": [{"name": "k", "origin": "torch"}], "system_profile": {"top": []}}
        return {}
    base, calls, fresh, dropped, _ = _profile_reference_with(monkeypatch, answer)
    assert calls == [("load_reference", False), ("warm", False), ("profile", True), ("profile_summary", False)]
    assert sent["load_reference"]["task_source"] == "SRC" and sent["load_reference"]["overrides"] == {"B": 2}
    assert sent["profile"]["warm"] is False and sent["warm"]["sets"] == sent["profile"]["sets"]
    assert base == {"ref_kernels": [{"name": "k"}], "ref_system_profile": {"top": []}}
    assert dropped == fresh and len(fresh) == 1  # reference_profilers 0: a fresh process each, dropped
    _, calls, _, _, _ = _profile_reference_with(monkeypatch, answer, early=False)
    assert calls == [("load_reference", False), ("profile", True), ("profile_summary", False)]


def test_a_reference_profiler_is_kept_for_the_next_reference_and_freed_between(monkeypatch):
    """With ``reference_profilers`` the process goes back, its model unloaded, and the next
    reference's profile runs in it (no start-up); it never holds a candidate."""
    answer = lambda job: {"kernels": []} if job["op"] == "profile_summary" else {}  # noqa: E731
    base, calls, fresh, dropped, slot = _profile_reference_with(monkeypatch, answer, kept=2)
    assert calls[-1] == ("unload", False) and not dropped and list(slot.ref_profilers) == fresh
    base2, calls2, fresh2, dropped2, slot = _profile_reference_with(monkeypatch, answer, kept=2, slot=slot)
    assert not fresh2 and not dropped2 and list(slot.ref_profilers) == fresh  # the same process, back again
    assert calls2[0] == ("load_reference", False) and "ref_profiling_error" not in base2


@pytest.mark.parametrize("exc", [evmod.WorkerRaised("RuntimeError: CUPTI_ERROR_UNKNOWN"),
                                 evmod.WorkerDied("killed by SIGSEGV"), evmod.PhaseTimeout("no answer in 5 s")])
def test_a_failed_reference_profile_is_a_profiling_error_and_its_worker_goes(monkeypatch, exc):
    def answer(job):
        if job["op"] == "profile":
            raise exc
        return {}
    for kept in (0, 2):  # a kept process that failed is not kept
        base, _, fresh, dropped, slot = _profile_reference_with(monkeypatch, answer, kept=kept)
        assert base["ref_profiling_error"].startswith(f"profiling the reference failed ({type(exc).__name__}")
        assert "ref_kernels" not in base and dropped == fresh and not slot.ref_profilers


def test_the_profiler_workers_reference_is_the_reference_workers_model(tmp_path):
    """``load_reference`` builds the model the reference worker prepared and timed: same
    parameters (same seeding), same mode; its warming forward runs."""
    import subprocess
    import sys

    task = (Path(__file__).parent / "candidates" / "tiny_task.py").read_text()
    code = textwrap.dedent(f"""
        import torch
        from rewards.harness import worker
        job = {{"task_source": {task!r}, "overrides": {{}}, "seed": 7, "device": "cpu", "model_mode": "eval",
               "trial_seeds": [8], "set_seeds": [9, 10, 11]}}
        ref = worker.Reference()
        ref.prepare(job)
        run = worker.ReferenceRun(job)
        same = all(torch.equal(a, b) for a, b in zip(ref.model.state_dict().values(), run.model.state_dict().values()))
        run.warm({{"sets": [ref.sets[0]]}})
        print(same, run.model.training, run.build)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True False {'cuda_sources': []}", out.stdout
