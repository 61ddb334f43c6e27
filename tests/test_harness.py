"""Harness units that need no compiler: config, comparison, kernel attribution, sandbox env."""

import json

import pytest
import torch

from rewards.harness import HarnessConfig
from rewards.harness.compare import compare, zeros_would_pass
from rewards.harness.kernels import declared_kernels, summarize_events, summarize_trace
from rewards.harness.sandbox import scrubbed_env

TOL = {"float32": 1e-4}


def test_config_rejects_unknown_keys_in_one_sentence():
    with pytest.raises(ValueError, match=r"unknown harness config key\(s\) \['trails'\]"):
        HarnessConfig.from_mapping({"trails": 5})


def test_config_rejects_a_judge_device_it_cannot_use():
    with pytest.raises(ValueError, match="judge_device must be auto, cpu or cuda"):
        HarnessConfig.from_mapping({"judge_device": "gpu"})
    assert HarnessConfig.from_mapping({"judge_device": "cuda:1"}).judge_device == "cuda:1"


def test_config_yaml_is_the_dataclass():
    from pathlib import Path

    import yaml

    d = yaml.safe_load((Path(__file__).parent.parent / "conf/harness/default.yaml").read_text())
    cfg = HarnessConfig.from_mapping(d)
    assert cfg.trials >= 5 and cfg.input_sets >= 3 and cfg.timed_calls >= 100
    assert HarnessConfig.from_mapping({"timeouts_s": {"build": 5}}).timeouts_s["timing"] == 300


def test_compare_catches_nan_shape_dtype_and_reports_errors():
    ref = [torch.ones(2, 3)]
    assert compare([torch.ones(2, 3) + 1e-6], ref, TOL, TOL)["ok"]
    assert "NaN" in compare([torch.full((2, 3), float("nan"))], ref, TOL, TOL)["error"]
    assert "shape" in compare([torch.ones(3, 2)], ref, TOL, TOL)["error"]
    assert "dtype" in compare([torch.ones(2, 3, dtype=torch.float64)], ref, TOL, TOL)["error"]
    r = compare([torch.ones(2, 3) * 2], ref, TOL, TOL)
    assert not r["ok"] and r["max_abs_err"] == pytest.approx(1.0) and r["max_rel_err"] == pytest.approx(1.0)


def test_compare_follows_allclose_and_keeps_integers_exact():
    # the one-pass fp32 rule must say what torch.allclose (fp64) says, on both sides of the line
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(4096, generator=g)
    for scale in (0.5e-4, 0.9e-4, 1.1e-4, 3e-4):
        out = ref + scale * torch.randn(4096, generator=g)
        want = torch.allclose(out.double(), ref.double(), atol=1e-4, rtol=1e-4)
        assert compare([out], [ref], TOL, TOL)["ok"] == want
    big = torch.tensor([2**30 + 1])  # fp32 would round both to 2**30
    assert not compare([big - 1], [big], {"int64": 0.0}, {"int64": 0.0})["ok"]
    half = torch.ones(8, dtype=torch.float16)
    assert compare([half], [half], {"float16": 1e-2}, {"float16": 1e-2})["ok"]
    # where the reference is Inf/NaN the position is not compared; a NaN elsewhere still fails
    r = torch.tensor([1.0, float("inf"), 2.0])
    assert compare([torch.tensor([1.0, 0.0, 2.0])], [r], TOL, TOL)["ok"]
    assert "NaN" in compare([torch.tensor([float("nan"), 0.0, 2.0])], [r], TOL, TOL)["error"]


def test_zeros_would_pass_agrees_with_compare():
    for v in (0.0, 5e-5, 1e-4, 1.0001e-4, 2e-4, -3e-5, 1.0):
        ref = torch.full((3,), v)
        assert zeros_would_pass([ref], TOL, TOL) == compare([torch.zeros(3)], [ref], TOL, TOL)["ok"], v


def test_zeros_would_pass_only_for_tolerance_dominated_outputs():
    assert zeros_would_pass([torch.full((4,), 1e-6)], TOL, TOL)
    assert not zeros_would_pass([torch.ones(4)], TOL, TOL)


def test_secrets_are_stripped_from_worker_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("HF_TOKEN", "x")
    monkeypatch.setenv("DB_PASSWORD", "x")
    env = scrubbed_env()
    assert not {"OPENAI_API_KEY", "HF_TOKEN", "DB_PASSWORD"} & set(env)
    assert "PATH" in env


def test_declared_kernels_ignore_comments_and_strings():
    src = ('/* __global__ void in_comment() {} */ const char* s = "__global__ void in_string()";\n'
           "__global__ void __launch_bounds__(128, 2) real_one(float* x) {}\n"
           "template <typename T> __global__ void tmpl(T* x) {}\n")
    assert declared_kernels([src]) == ["real_one", "tmpl"]


def test_trace_summary_classifies_kernels_and_streams(tmp_path):
    ev = [
        {"cat": "kernel", "name": "spin_kernel(long)", "dur": 5, "args": {"stream": 7}},
        {"cat": "kernel", "name": "void my_fused<256>(float*, int)", "dur": 30, "args": {"stream": 7}},
        {"cat": "kernel", "name": "sm90_xmma_gemm_f32f32", "dur": 70, "args": {"stream": 7}},
        {"cat": "kernel", "name": "hidden(float*)", "dur": 100, "args": {"stream": 13}},
        {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "dur": 3, "args": {"bytes": 400}},
    ]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    s = summarize_trace(str(p), ["my_fused", "hidden", "never_runs"], calls=1)
    origins = {k["name"]: k["origin"] for k in s["kernels"]}
    assert origins["sm90_xmma_gemm_f32f32"] == "library" and origins["void my_fused<256>(float*, int)"] == "candidate"
    assert s["decoy_kernels"] == ["never_runs"]
    assert s["candidate_kernel_share"] == pytest.approx(130 / 200)
    assert s["side_stream"] is True and s["streams"] == [7, 13]
    assert s["launches_per_call"] == 3 and s["memcpy"]["h2d_bytes"] == 400


def _k(name, ts, dur, stream):
    return {"cat": "kernel", "name": name, "ts": ts, "dur": dur, "args": {"stream": stream}}


def _bracketed(side_kernels, joined, calls=2, timed=7):
    """A profiled trace: per call, marker / work on the timed stream / marker, then a device sync.
    ``joined``: the timed stream waited for the side kernels before its closing marker."""
    ev = []
    for c in range(calls):
        t = 1000.0 * c
        ev += [_k("spin_kernel(long)", t, 2, timed), _k("void my_gelu(float*)", t + 5, 20, timed)]
        ev += [_k(n, t + a, d, s) for n, a, d, s in side_kernels]
        end = max([t + 27] + [t + a + d for _, a, d, _ in side_kernels if joined])
        ev.append(_k("spin_kernel(long)", end, 2, timed))
    return ev


def test_python_side_stream_left_unjoined_is_hidden_work():
    # torch.cuda.Stream() inside forward, work launched there and never waited for: the closing
    # marker on the timed stream runs while the side kernel still runs
    s = summarize_events(_bracketed([("hidden_gelu(float*)", 6, 300, 13)], joined=False), ["my_gelu", "hidden_gelu"], calls=2)
    assert s["side_stream"] is True and s["timed_stream"] == 7
    assert s["hidden_kernels"] == ["hidden_gelu"] and s["hidden_us"] == pytest.approx(300)
    assert s["streams"] == [7, 13] and s["side_streams_joined"] is False


def test_side_stream_joined_back_is_not_hidden():
    # current_stream().wait_stream(side): the closing marker waits for the side kernel
    s = summarize_events(_bracketed([("joined_gelu(float*)", 6, 300, 13)], joined=True), ["my_gelu", "joined_gelu"], calls=2)
    assert s["side_stream"] is False and s["hidden_kernels"] == [] and s["hidden_us"] == 0
    assert s["side_streams_joined"] is True


def test_no_side_stream_on_a_single_stream_candidate():
    s = summarize_events(_bracketed([], joined=False), ["my_gelu"], calls=2)
    assert s["side_stream"] is False and s["streams"] == [7] and s["side_streams_joined"] is False
    assert s["launches_per_call"] == 1 and s["candidate_kernel_share"] == 1.0


def test_fast_build_rewrites(monkeypatch):
    from rewards.harness import buildcache
    from rewards.harness.buildcache import lighten

    # the header rewrites alone: split_launchers (tests/test_buildspeed.py) comes first when on,
    # and whatever an earlier in-process install() left must not decide this test
    monkeypatch.setitem(buildcache._STATE, "speed", {"split_launchers": False})
    raw = "#include <torch/extension.h>\n__global__ void k(float* x) {}\nvoid launch(float* x, cudaStream_t s) { k<<<1, 1, 0, s>>>(x); }"
    args = {"name": "m", "cpp_sources": ["void launch(float*, cudaStream_t);"], "cuda_sources": [raw]}
    light, kind = lighten(args)
    assert kind == "torch_free_cuda" and light["no_implicit_headers"] is True
    assert light["cpp_sources"][0] == "#include <torch/extension.h>"  # bindings still get torch
    assert "torch" not in "".join(light["cuda_sources"]) and "cuda_runtime.h" in light["cuda_sources"][0]
    uses = {**args, "cuda_sources": [raw + "\ntorch::Tensor f(torch::Tensor x) { return x; }"]}
    light, kind = lighten(uses)
    assert kind == "no_extension_h" and "no_implicit_headers" not in light
    assert "#include <torch/extension.h>" not in light["cuda_sources"][0]
    assert lighten({**args, "cpp_sources": []}) == ({**args, "cpp_sources": []}, None)  # bindings in .cu
    assert lighten({**args, "no_implicit_headers": True})[1] is None  # the candidate manages headers


def test_lru_insert_keeps_the_freshest_and_evicts_the_stalest():
    import collections

    from rewards.harness.evaluator import _lru_insert

    cache, gone = collections.OrderedDict(), []
    for k in "abc":
        _lru_insert(cache, k, k.upper(), 2, gone.append)
    assert list(cache) == ["b", "c"] and gone == ["A"]
    _lru_insert(cache, "b", "B", 2, gone.append)  # a hit refreshes, evicts nothing
    _lru_insert(cache, "d", "D", 2, gone.append)
    assert list(cache) == ["b", "d"] and gone == ["A", "C"]
