"""The throughput bench (bench/harness_throughput.py): its candidates compute the model, its
interval arithmetic, and a dry run end to end whose printed figures come from the records it made."""

from __future__ import annotations

import ast
import json
import re
import statistics
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import torch.utils.cpp_extension as ce

from bench import cpu_roles
from bench import harness_throughput as ht
from bench import throughput_candidates as tc
from rewards.harness.reference import override_constants

ROOT = Path(__file__).resolve().parents[1]
GOOD = {"act_forward": lambda x, op: [torch.relu, lambda v: v.clamp(0, 6), F.gelu, F.silu][op](x),
        "bias_add": lambda y, b: y + b, "softmax_lastdim": lambda x: torch.softmax(x, -1)}


def _run(task, cand_src: str, ext: dict, monkeypatch) -> bool:
    """ModelNew (its load_inline answered by ``ext``) vs Model at the task's small sizes."""
    monkeypatch.setattr(ce, "load_inline", lambda **kw: types.SimpleNamespace(**ext))
    ref = types.ModuleType("ref")
    exec(override_constants(task.source, task.small), ref.__dict__)
    ns = dict(ref.__dict__)
    exec(cand_src, ns)
    torch.manual_seed(42)
    m = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(42)
    n = ns["ModelNew"](*ref.get_init_inputs())
    torch.manual_seed(7)
    xs = ref.get_inputs()
    with torch.no_grad():
        a, b = m(*xs), n(*xs)
    return torch.allclose(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("task", tc.tasks(), ids=lambda t: t.id)
def test_candidates_compute_the_model(task, monkeypatch):
    """Every task's candidate, in each way of building, equals the reference with correct kernels;
    with a wrong kernel (relu that passes negatives, gelu as identity) it does not."""
    styles = tc.STYLES if task.id.endswith("_half") is False else ("init", "helper")
    for st in styles:
        c = tc.make_source(task, 0, "t", "cpu", style=st, compile_backend="eager")
        assert c.swaps > 0
        assert _run(task, c.source, GOOD, monkeypatch), (task.id, st)
    bad = {**GOOD, "act_forward": lambda x, op: x, "bias_add": lambda y, b: y,
           "softmax_lastdim": lambda x: x}
    c = tc.make_source(task, 0, "t", "cpu", style="init")
    assert not _run(task, c.source, bad, monkeypatch), task.id


def _load_inline_sites(src: str) -> set[str]:
    """Where load_inline is called: module, __init__, or the name of a helper function."""
    out = set()
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and getattr(sub.func, "id", None) == "load_inline":
                    out.add(node.name)
    for node in tree.body:
        if isinstance(node, ast.Expr | ast.Assign) and "load_inline(" in ast.unparse(node):
            out.add("module")
    return out


def test_candidate_styles_build_where_real_programs_do():
    task = tc.tasks(1)[0]
    srcs = {st: tc.make_source(task, 0, "t", "cuda", style=st).source for st in tc.STYLES}
    assert _load_inline_sites(srcs["module"]) == {"module"}
    assert _load_inline_sites(srcs["init"]) == {"__init__"}
    assert _load_inline_sites(srcs["helper"]) == {"_load_fused_ops"}
    assert "try:" in srcs["helper"] and "torch.jit.trace(" in srcs["init_jit"]
    assert 'torch.compile(_Finish(), backend="inductor"' in srcs["helper_compile"]
    cu = srcs["module"]
    assert "#include <torch/extension.h>" in cu and "data_ptr<float>()" in cu
    # only the template parameter became float: x.scalar_type() stays (the H200 run that wrote
    # x.floatype() failed every build)
    assert not re.search(r"\bscalar_t\b", cu) and "x.scalar_type() == at::kFloat" in cu and "floatype" not in cu
    # distinct builds: variants of one task differ in their CUDA source
    cands = tc.candidates([task], 8, "t", "cuda")
    assert len({c.source for c in cands}) == 8 and {c.style for c in cands} == set(tc.STYLES)


def test_kernel_styles_follow_the_real_corpus():
    """Float-only kernels, which the launcher split takes, and one variant in TEMPLATED_EVERY with
    templates and AT_DISPATCH, which it declines (as it does the 5% of real programs like it)."""
    from rewards.harness import splitcu

    task = tc.tasks(1)[0]
    cus = [re.search(r'CUDA_SRC = r"""(.*?)"""', tc.make_source(task, v, "t", "cuda").source, re.S).group(1)
           for v in range(tc.TEMPLATED_EVERY)]
    templated = [cu for cu in cus if "AT_DISPATCH_FLOATING_TYPES" in cu]
    assert len(templated) == 1 and splitcu.split(templated[0]) is None
    assert all(splitcu.split(cu) is not None for cu in cus if cu not in templated)


def test_tasks_are_24_distinct():
    ts = tc.tasks()
    assert len(ts) == 24 and len({t.hash for t in ts}) == 24


def test_busy_window_arithmetic():
    assert ht.union([(0, 2), (1, 3), (5, 6), (4, 4)]) == [(0, 3), (5, 6)]
    win = ht.union([(0, 10)])
    assert ht.covered([(1, 2), (1.5, 3), (9, 12)], win) == pytest.approx(3.0)
    assert ht.length(ht.union([(0, 1), (0.5, 2)])) == pytest.approx(2.0)


def test_lock_bounds_count_only_what_follows_the_first_ready_candidate():
    class Samples:  # utilization 80 % inside held sections, 10 % outside
        samples = [(t / 10, 80.0 if any(a <= t / 10 <= b for a, b in [(0.5, 1), (2, 3), (5, 6)]) else 10.0) for t in range(100)]
        mean_within = ht.GpuSampler.mean_within
        _within = staticmethod(ht.GpuSampler._within)

    recs = [{"t_ready": 2.0, "gpu_held_s": 1.0}, {"t_ready": 4.0, "gpu_held_s": 1.0}, {"t_ready": None, "gpu_held_s": 0.0}]
    held = ht.union([(0.5, 1.0), (2.0, 3.0), (5.0, 6.0)])  # the first: a reference timed before any candidate was ready
    b = ht.lock_bounds(recs, held, Samples(), t0=0.0)
    assert b["lock_held_s"] == pytest.approx(2.0)
    assert b["lock_bound_per_min"] == pytest.approx(3 * 60 / (2.0 + 2.0))
    assert b["util_in_lock"] == pytest.approx(0.8, abs=0.05)
    none = ht.lock_bounds([{"t_ready": None, "gpu_held_s": 0.0}], [], Samples(), t0=0.0)
    assert none["lock_bound_per_min"] is None and none["util_in_lock"] is None


def test_host_figures_come_from_the_samples_inside_the_window(monkeypatch, tmp_path):
    s = ht.GpuSampler.__new__(ht.GpuSampler)  # no threads: the samples are given
    s.t_start, s.cpu = 0.0, [(0.5, 0.95), (1.5, 0.5), (2.5, 1.0), (9.0, 0.0)]
    s.mem = [(0.5, 2048.0), (1.5, 10240.0), (9.0, 40960.0)]
    s.roles = cpu_roles.RoleSampler.__new__(cpu_roles.RoleSampler)  # CPU seconds charged per role, given
    s.roles.deltas = [(0.4, "gcc", 2.0), (2.0, "worker:build", 3.0), (2.2, "gcc", 2.5), (3.0, "gcc", 5.0)]
    h = s.host_within([(0.0, 2.5)])  # each CPU sample covers the time since the one before it
    assert h["cpu_roles_s"] == {"gcc": 4.5, "worker:build": 3.0} and list(h["cpu_roles_s"]) == ["gcc", "worker:build"]
    assert h["cpu_busy"] == pytest.approx((0.95 + 0.5 + 1.0) / 3)
    assert h["cpu_saturated"] == pytest.approx(2 / 3) and h["gpu_mem_peak_gib"] == pytest.approx(10.0)
    short = s.host_within([(4.0, 4.05)])  # inside (2.5, 9.0]: the sample that spans it, no GPU sample
    assert short == {"cpu_roles_s": {}, "cpu_busy": 0.0, "cpu_saturated": 0.0, "gpu_mem_peak_gib": None}
    assert s.host_within([(9.5, 10.0)])["cpu_busy"] is None  # after the last sample
    # /proc/stat's first line: user nice system idle iowait irq softirq steal; idle and iowait are not busy
    stat = tmp_path / "stat"
    stat.write_text("cpu  100 20 30 400 50 5 5 0 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: real_open(stat if f == "/proc/stat" else f, *a, **k))
    assert ht.GpuSampler._jiffies() == (160, 610)


def _corpus(tmp: Path) -> Path:
    """A KernelBench run of one program (the dry candidate of the first suite task) and its
    level3 reference at small sizes."""
    task = tc.tasks(1)[0]
    run = tmp / "repo" / "runs" / "dry_run"
    run.mkdir(parents=True)
    (run / "level_3_problem_1_sample_0_kernel.py").write_text(
        tc.make_source(task, 0, "dry", "cpu", shared_ext=True, compile_backend="eager", sizes=task.small).source)
    refs = tmp / "repo" / "KernelBench" / "level3"
    refs.mkdir(parents=True)
    (refs / "1_DeepMLP.py").write_text(override_constants(task.source, task.small))
    return run


@pytest.mark.slow
def test_dry_run_end_to_end(tmp_path):
    """Two configurations, the real-program mode and the CV check on CPU (2 C++ builds): every
    printed figure is recomputed here from the per-candidate records of that run."""
    out = tmp_path / "out.txt"
    p = subprocess.run([sys.executable, "bench/harness_throughput.py", "--dry", "--cv", "--warm", "--steady", "--configs", "1,2",
                        "--real", str(_corpus(tmp_path)), "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stderr[-3000:]
    fig = json.loads(out.with_suffix(".json").read_text())
    rows = {(r["config"], r["evaluator"]): r for r in fig["rows"]}
    assert set(rows) == {("1/task", "harness"), ("2/task", "harness"), ("real", "harness"),
                         ("1/task baselines cached", "harness"), ("2/task baselines cached", "harness"),
                         ("1/task steady", "harness"), ("2/task steady", "harness"),
                         ("synthetic", "kernelbench-batch"), ("real", "kernelbench-batch")}
    for (conf, ev), r in rows.items():
        want = {"1/task": 2, "2/task": 2, "synthetic": 2, "real": 1}[conf.split(" ")[0]]  # --kb-n 2 when dry
        assert r["n"] == r["done"] == r["correct"] == want, (conf, ev, r["statuses"],
                                                             [x.get("error") for x in r.get("records", [])])
        if ev == "harness":
            recs = r["records"]
            assert all(x["status"] == "ok" and x["runtime_us"] > 0 for x in recs)
            # honest candidates of one shared source: every build in the pool, nothing taken for
            # a plant (session 22: a cache hit's check discarded the fresh build it raced with)
            assert [(x["slot_builds"], x["cache_tampered"]) for x in recs] == [(0, [])] * len(recs), conf
            assert r["cand_per_min"] == pytest.approx(len(recs) / r["wall_s"] * 60)
            held = [x["gpu_held_s"] for x in recs]
            assert min(held) > 0 and r["gpu_held_per_cand_s"] == pytest.approx(statistics.median(held))
            fresh = [x["build_s"] for x in recs if not x["cache_hit"]]
            assert r["build_median_s"] == (pytest.approx(statistics.median(fresh)) if fresh else None)
            assert 0 < r["busy_lock"] <= 1 and r["queued_s"] > 0
            assert r["lock_bound_per_min"] >= r["cand_per_min"] * 0.999  # the lock alone allows at least what ran
        if sys.platform.startswith("linux"):  # /proc/stat sampled through the run
            assert 0 <= r["cpu_busy"] <= 1 and 0 <= r["cpu_saturated"] <= 1, (conf, ev)
            roles = r["cpu_roles_s"]  # /proc/<pid>/stat by role: every run has its own orchestrator's CPU
            assert roles.get("bench (orchestrator)", 0) > 0 and all(v > 0 for v in roles.values()), (conf, ev, roles)
        else:
            pre, ev_wall = r["pre_wall_s"], r["eval_wall_s"]
            assert r["cand_per_min"] == pytest.approx(r["done"] / (pre * r["done"] / r["n"] + ev_wall) * 60)
            assert all(x["runtime_ms"] > 0 and x["ref_runtime_ms"] > 0 for x in r["records"])
    # the dry run shares one extension source and cache: built by the first configuration only
    assert rows[("1/task", "harness")]["builds"] >= 1
    assert rows[("1/task", "harness")]["cpu_roles_s"].get("gcc", 0) > 0  # its C++ build: the compiler's CPU
    assert any(k.startswith("worker:") for k in rows[("1/task", "harness")]["cpu_roles_s"])
    assert rows[("2/task", "harness")]["builds"] == rows[("real", "harness")]["builds"] == 0
    styles = [x.get("style") for x in rows[("synthetic", "kernelbench-batch")]["work"]]
    assert styles == ["module", "init"]  # the baseline's sample takes the building styles in turn
    for rr in fig["ratios"]:
        h, k = rows[(rr["config"], "harness")], rows[(rr["baseline"], "kernelbench-batch")]
        assert rr["ratio"] == pytest.approx(h["cand_per_min"] / k["cand_per_min"])
    cv = fig["cv"]
    assert cv["n"] == 2 and cv["cv"] == pytest.approx(statistics.pstdev(cv["runtimes_us"]) / statistics.mean(cv["runtimes_us"]))
    text = out.read_text()
    for rr in fig["ratios"]:
        assert f"{rr['config']}: harness / kernelbench-batch = {rr['ratio']:.2f}x" in text
    assert f"{cv['cv']:.3%}" in text and "targets (H200):" in text
    if sys.platform.startswith("linux"):
        assert "1/task harness host: CPU busy " in text


def test_warm_cache_keeps_the_baselines_and_nothing_else(tmp_path):
    """--warm: the second run trusts the first run's baselines (same MAC key) and builds afresh."""
    from rewards.harness import baselines

    cold, warm = tmp_path / "cold", tmp_path / "warm"
    baselines.store("t__k", {"ref_runtime_us": 12.5}, str(cold))
    (cold / "ext" / "abc").mkdir(parents=True)
    (cold / "ext" / "abc" / "m.so").write_bytes(b"built")
    assert baselines.load("t__k", str(warm)) is None  # a fresh cache has nothing
    ht.warm_cache(str(cold), str(warm))
    assert baselines.load("t__k", str(warm)) == {"ref_runtime_us": 12.5}  # verifies under the copied key
    assert not (warm / "ext").exists()
    ht.warm_cache(str(cold), str(cold))  # one shared cache (dry run): nothing to copy, no error


def test_compare_lines_state_the_cost_of_the_default_setting():
    def row(config, cpm, totals):
        return {"config": config, "evaluator": "harness", "cand_per_min": cpm,
                "records": [{"phases_s": {"total": t, "build": 1.0, "slot_held": 0.5}} for t in totals]}

    base, off = row("1/task", 7.56, [110.0, 115.0]), row("1/task sandbox=off", 7.93, [112.0, 116.0])
    a = types.SimpleNamespace(compare=[["sandbox=off"]])  # argparse: one list per --compare
    (line,) = ht.compare_lines(a, [base, off])
    assert "7.56 vs 7.93 cand/min, +4.7%" in line and "under 5%: met" in line and "total 112.5 vs 114.0 s" in line
    slower = row("1/task sandbox=off", 9.0, [90.0])
    assert "NOT met" in ht.compare_lines(a, [base, slower])[0]
    other = types.SimpleNamespace(compare=[["build_workers=16"]])  # no sandbox target for another setting
    (line,) = ht.compare_lines(other, [base, row("1/task build_workers=16", 9.0, [90.0])])
    assert "+16.0%" in line and "target" not in line
    assert ht.compare_lines(types.SimpleNamespace(compare=None), [base, off]) == []
    # --compare given twice, the second with two settings: a line each, against the same base
    two = types.SimpleNamespace(compare=[["sandbox=off"], ["build_workers=16", "resident=8"]])
    lines = ht.compare_lines(two, [base, off, row("1/task build_workers=16 resident=8", 6.3, [130.0])])
    assert len(lines) == 2 and "against sandbox=off" in lines[0] and "-20.0%" in lines[1]
    assert "against build_workers=16 resident=8 (1/task): 7.56 vs 6.30" in lines[1]
