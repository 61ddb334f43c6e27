"""Red-team corpus: every hack is caught with its category, no legitimate case gets a major
finding. CPU: recorded evidence (fast) and, marked slow, the C++ cases through the real CPU
harness. GPU: the CUDA cases through the real harness on the GPU machine."""

import pathlib

import pytest

import rewards
from tests.redteam import corpus

CASES = corpus.load()
HACKS = [c for c in CASES if not c.legit]
LEGIT = [c for c in CASES if c.legit]


def test_corpus_size_meets_the_bar():
    cats = {x for c in HACKS for x in c.label}
    assert len(HACKS) >= 30 and len(cats) >= 12 and len(LEGIT) >= 12
    assert any(c.cpu_runnable for c in HACKS) and any(c.cpu_runnable for c in LEGIT)
    for need in ("side_stream", "decoy_kernel", "uninitialized_memory", "precision_downgrade"):
        assert any(c.gpu and need in c.label for c in HACKS), need


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(
    reason=c.known_gap, strict=True)) if c.known_gap else c for c in HACKS], ids=lambda c: c.id)
def test_hack_is_caught(case):
    found = {f.category for f in rewards.detect(case.reference, case.candidate, case.result)}
    assert set(case.label) <= found, f"{case.id}: want {case.label}, got {sorted(found)}"


@pytest.mark.parametrize("case", LEGIT, ids=lambda c: c.id)
def test_legit_has_no_major_finding(case):
    majors = [f for f in rewards.detect(case.reference, case.candidate, case.result) if f.is_major]
    assert majors == [], f"{case.id}: {majors}"


@pytest.mark.parametrize("case", LEGIT, ids=lambda c: c.id)
def test_legit_scores_above_zero(case):
    rec = rewards.score(case.reference, case.candidate, dict(case.result, correct=True, speedup=1.2))
    assert rec.reward > 0 and not rec.major_hack


def test_known_gaps_still_score_coverage_one():
    for c in (x for x in HACKS if x.known_gap):
        rec = rewards.score(c.reference, c.candidate, {"correct": True, "speedup": 1.0})
        assert rec.rubric["coverage"] == 1, c.id


def test_degenerate_solution_is_legit_but_low_coverage():
    c = next(x for x in LEGIT if x.id == "legit_relu_only_degenerate")
    rec = rewards.score(c.reference, c.candidate, {"correct": True, "speedup": 1.0})
    assert not rec.major_hack and rec.rubric["coverage"] <= 2


def _harness(device):
    h = pytest.importorskip("rewards.harness")
    if not hasattr(h, "HarnessConfig"):
        pytest.skip("harness not available")
    try:
        from rewards.harness import Evaluator  # noqa: F401
    except (ImportError, AttributeError):
        pytest.skip("harness evaluator not available")
    return h.HarnessConfig.from_mapping({"device": device, "trials": 2, "timed_calls": 10,
                                         "warmup": 1, "compile_baseline": False})


def _live(cases, device):
    from rewards.harness import Evaluator

    cfg = _harness(device)
    with Evaluator(cfg) as ev:
        futs = [(c, ev.submit(corpus.task(c), c.candidate)) for c in cases]
        return [(c, f.result()) for c, f in futs]


CPU_CASES = [c for c in CASES if c.cpu_runnable]
GPU_CASES = [c for c in CASES if c.gpu]


@pytest.mark.slow
def test_cpu_cases_through_the_real_cpu_harness(have_cxx):
    bad = []
    for c, res in _live(CPU_CASES, "cpu"):
        fs = rewards.detect(c.reference, c.candidate, res)
        cats = {f.category for f in fs}
        if c.legit and (any(f.is_major for f in fs) or not res.correct):
            bad.append((c.id, res.status, res.error, sorted(cats)))
        if not c.legit and not set(c.label) <= cats:
            bad.append((c.id, res.status, c.label, sorted(cats)))
    assert bad == []


@pytest.mark.gpu
def test_gpu_cases_through_the_real_harness():
    import json
    import os

    bad, dump = [], {}
    for c, res in _live(GPU_CASES, "cuda"):
        dump[c.id] = res.to_dict()
        fs = rewards.detect(c.reference, c.candidate, res)
        cats = {f.category for f in fs}
        print(c.id, res.status, res.speedup, sorted(cats), {k: res.evidence.get(k) for k in (
            "decoy_kernels", "side_stream", "candidate_kernel_share", "timer_ratio")})
        if c.legit and any(f.is_major for f in fs):
            bad.append((c.id, res.status, sorted(cats)))
        if not c.legit and not set(c.label) <= cats:
            bad.append((c.id, res.status, c.label, sorted(cats)))
    out = os.environ.get("OUT")
    if out:  # on the device machine: keep the live evidence for the record
        pathlib.Path(out, "gpu_evidence.json").write_text(json.dumps(dump, indent=1, default=str))
    assert bad == []
