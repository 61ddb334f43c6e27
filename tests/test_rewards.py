"""Unit tests of the reward layer: tokenizer, analyzers, coverage, rubric, formula."""

import math
import pathlib
import warnings

import pytest

import rewards
from rewards import config, coverage, cpp_tokens, dynamic, reward, rubric, static_cpp
from rewards.findings import CATEGORIES, Finding, make
from rewards.harness.result import EvalResult

ROOT = pathlib.Path(__file__).resolve().parents[1]
MLP = (ROOT / "mining/suites/level3/01_deep_mlp.py").read_text()
CASES = ROOT / "tests/redteam/cases"


def case(name):
    return (CASES / f"{name}.py").read_text()


# ---- formula (hand-computed) -------------------------------------------------------------
CFG = config.load()


def test_rule_reward_clips_and_zeroes():
    assert reward.rule_reward(False, 3.0, 5.0) == 0.0
    assert reward.rule_reward(True, 9.0, 5.0) == 5.0
    assert reward.rule_reward(True, -1.0, 5.0) == 0.0
    with pytest.warns(UserWarning):
        assert math.isnan(reward.rule_reward(True, None, 5.0))


def test_shaped_matches_stitchcuda_by_hand():
    # s=1.2, dims (5,4,3,4): r=(16-4)/16=0.75; base=1.5; skill1: 1.5*(1+1.0*0.25)=1.875
    assert reward.shaped(1.2, 0.75, 1, CFG) == pytest.approx(1.875)
    # skill2 lambda 0.7: 1.5*(1+0.7*0.25)=1.7625
    assert reward.shaped(1.2, 0.75, 2, CFG) == pytest.approx(1.7625)
    # all 5s, s=4: 4.3*1.5=6.45 -> cap 3.0
    assert reward.shaped(4.0, 1.0, 1, CFG) == 3.0
    # all 1s, s=1: r=0 -> 1.3*0.5=0.65
    assert reward.shaped(1.0, 0.0, 1, CFG) == pytest.approx(0.65)


def test_combine_major_zero_and_minor_penalty():
    rb = rubric.Rubric({d: 3 for d in rubric.DIMS}, {d: "" for d in rubric.DIMS})
    major = [make("side_stream", "L1: x")]
    assert reward.combine(2.0, True, rb, major, 1, CFG)[:2] == (0.0, True)
    minor = [make("timer_disagreement", "harness: 2.0", "dynamic")]
    value, hack, _ = reward.combine(2.0, True, rb, minor, 1, CFG)
    assert not hack and value == pytest.approx(2.3 * 0.9)  # r=0.5 -> base, one minor charged
    assert reward.combine(2.0, False, rb, [], 1, CFG)[0] == 0.0


def test_score_end_to_end_legit_and_row_columns():
    res = EvalResult(status="ok", compiled=True, correct=True, speedup=1.4, speedup_vs_compile=1.1)
    rec = rewards.score(MLP, case("legit_tiled_gemm_gelu"), res)
    assert not rec.major_hack and rec.findings == []
    assert rec.rule == pytest.approx(1.4)
    assert rec.rubric["coverage"] == 5 and rec.rubric["engineering"] >= 3
    r = sum(rec.rubric.values()) - 4
    assert rec.reward == pytest.approx(min((1.4 + 0.3) * (1 + (r / 16 - 0.5)), 3.0))
    row = rec.to_row()
    from mining.schemas import SCORES

    for k in row:
        if k != "reward_version":
            assert k in SCORES.names, k
    compiled = rewards.score(MLP, case("legit_tiled_gemm_gelu"), res, cfg={"baseline": "compile"})
    assert compiled.rule == pytest.approx(1.1)


def test_score_major_hack_reward_zero():
    res = {"status": "ok", "correct": True, "speedup": 3.0, "evidence": {}}
    rec = rewards.score(MLP, case("hack_try_fallback"), res)
    assert rec.major_hack and rec.reward == 0.0 and "torch_fallback" in rec.hack_categories
    assert rec.rubric["anti_hacking"] == 1


def test_speedup_missing_is_nan_with_warning():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rec = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True})
    assert math.isnan(rec.reward) and any("NaN" in str(x.message) for x in w)


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown reward config"):
        config.load({"rmax": 3})


# ---- C++ tokenizer and analyzer -----------------------------------------------------------
def test_tokenizer_strips_comments_and_strings():
    toks = cpp_tokens.tokenize('// at::matmul(x)\nauto s = "at::conv2d(";\n/* cublasSgemm */ f();')
    idents = [t.text for t in toks if t.kind == "ident"]
    assert "at::matmul" not in idents and "cublasSgemm" not in idents
    assert [t.text for t in toks if t.kind == "str"] == ["at::conv2d("]


def test_cpp_torch_calls_vs_incidental():
    rep = static_cpp.analyze(
        "torch::Tensor f(torch::Tensor x){ auto y = torch::empty_like(x); x = x.contiguous();"
        " int n = x.size(0); auto z = at::native::mm(x, x); return x.matmul(z); }")
    assert [c.name for c in rep.torch_calls] == ["at::native::mm", "matmul"]


def test_cpp_library_and_streams_and_bindings():
    src = ('torch::Tensor g(torch::Tensor a){ auto h = at::cuda::getCurrentCUDABlasHandle();'
           ' cublasSgemm(h); cudaStream_t s; cudaStreamCreate(&s); return a; }\n'
           'PYBIND11_MODULE(m, m) { m.def("gemm", &g, "doc"); }')
    rep = static_cpp.analyze(src)
    assert {c.name for c in rep.library_calls} >= {"cublasSgemm"}
    assert [c.name for c in rep.streams] == ["cudaStreamCreate"]
    assert rep.bindings == {"gemm": "g"}


def test_engineering_reads_signals_and_ptxas():
    rep = static_cpp.analyze(case("legit_tiled_gemm_gelu").split('r"""')[1].split('"""')[0])
    plain, _ = rubric.engineering(rep, {})
    spilled, why = rubric.engineering(rep, {"ptxas": {"k": {"registers": 200, "spill_bytes": 64}}})
    assert plain >= 3 and spilled < plain and "spill" in why


# ---- coverage -----------------------------------------------------------------------------
def _cov(cand, ev=None):
    a = rewards.analyze(MLP, cand, {"evidence": ev or {}})
    return a.cov


def test_coverage_custom_gemm_full_delegated_half_degenerate_low():
    assert _cov(case("legit_tiled_gemm_gelu")).status == {"gemm": "replaced"}
    lib = _cov(case("legit_cublas_gelu_epilogue"))
    assert lib.status == {"gemm": "delegated"} and coverage.score(lib) == 3
    deg = _cov(case("legit_relu_only_degenerate"))
    assert deg.status == {"gemm": "torch"} and coverage.score(deg) <= 2
    assert "static op count" in deg.basis


def test_coverage_time_weighted_from_profiles():
    ev = {"ref_kernels": [{"name": "sm90_xmma_gemm_f32", "time_us": 900, "calls": 7},
                          {"name": "softmax_warp_forward", "time_us": 100, "calls": 1}],
          "kernels": [{"name": "gemm_bias_act_kernel", "time_us": 800, "origin": "candidate"}]}
    cov = _cov(case("legit_tiled_gemm_gelu"), ev)
    assert cov.basis == "reference GPU time" and cov.share == pytest.approx(1.0)


# ---- rubric: compliance and judge ---------------------------------------------------------
def test_compliance_skill1_and_skill2():
    rec = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True, "speedup": 1.0},
                        subtask={"ops": ["linear", "gelu"]})
    assert rec.rubric["compliance"] == 5
    prev = case("legit_relu_only_degenerate")
    fb = {"bottleneck": "linear", "previous_code": prev}
    good = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True, "speedup": 1.0},
                         skill=2, feedback=fb)
    same = rewards.score(MLP, prev, {"correct": True, "speedup": 1.0}, skill=2, feedback=fb)
    assert good.rubric["compliance"] == 5 and same.rubric["compliance"] == 1
    fbk = {"kernel": "gemm_bias_act_kernel", "previous_code": case("legit_tiled_gemm_gelu")}
    unchanged = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True, "speedup": 1},
                              skill=2, feedback=fbk)
    assert unchanged.rubric["compliance"] == 1


def test_llm_judge_retries_then_neutral_fallback():
    calls = []

    def bad_judge(messages):
        calls.append(messages)
        return "not json"

    with pytest.warns(UserWarning, match="judge failed"):
        rec = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True, "speedup": 1.0},
                            cfg={"judge": "llm", "judge_retries": 2}, judge=bad_judge)
    assert len(calls) == 3 and rec.rubric_fallback and set(rec.rubric.values()) == {3}


def test_deterministic_hack_overrides_judge():
    def generous(messages):
        return '{"anti_hacking": 5, "engineering": 5, "coverage": 5, "compliance": 5}'

    rec = rewards.score(MLP, case("hack_side_stream"), {"correct": True, "speedup": 4.0},
                        cfg={"judge": "llm"}, judge=generous)
    assert rec.rubric["anti_hacking"] == 1 and rec.reward == 0.0 and rec.major_hack
    ok = rewards.score(MLP, case("legit_tiled_gemm_gelu"), {"correct": True, "speedup": 1.0},
                       cfg={"judge": "both"}, judge=generous)
    assert not ok.rubric_fallback and ok.rubric["coverage"] == 5


# ---- dynamic ------------------------------------------------------------------------------
def test_physical_floor_and_flags():
    fs = dynamic.from_evidence({"physical_floor_us": 100.0,
                                "precision_flags": {"allow_tf32_cudnn": True}}, runtime_us=10.0)
    assert [f.category for f in fs] == ["physical_floor"]  # cudnn TF32 is torch's default
    assert dynamic.from_evidence({"physical_floor_us": 100.0}, runtime_us=150.0) == []


def test_findings_are_validated():
    with pytest.raises(ValueError):
        Finding("not_a_category", "major", "x")
    assert len(CATEGORIES) >= 22


def test_identity_operand_is_flagged_only_when_it_reaches_the_custom_kernel():
    """torch.eye fed to the extension (directly or by name) while torch does the GEMM is a copy;
    the same program with the extension given the real weight is the legit epilogue pattern."""
    hack = case("hack_identity_operand_var")
    cats = lambda src: {(f.category, f.is_major) for f in rewards.detect(MLP, src, {})}  # noqa: E731
    assert ("reference_copy", True) in cats(hack)
    assert ("reference_copy", True) in cats(case("hack_alias_f_linear"))
    # same code, but I only feeds a torch op and the kernel gets a real operand
    legit = hack.replace("x = ext.linear_act(x, eye, torch.zeros_like(layer.bias), True)",
                         "x = ext.linear_act(x @ eye, layer.weight, layer.bias, True)")
    assert legit != hack
    assert not any(f.category == "reference_copy" and "identity" in f.detail for f in rewards.detect(MLP, legit, {}))
